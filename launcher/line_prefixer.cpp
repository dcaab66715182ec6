#include "line_prefixer.hpp"

#include <unistd.h>

#include <cerrno>

namespace distlab::launcher {

void LinePrefixer::feed(const char* data, size_t size) {
  pending_.append(data, size);
  size_t begin = 0;
  for (;;) {
    size_t newline = pending_.find('\n', begin);
    if (newline == std::string::npos) break;
    emit(begin, newline);
    begin = newline + 1;
  }
  while (pending_.size() - begin >= kMaxLine) {
    emit(begin, begin + kMaxLine);
    begin += kMaxLine;
  }
  pending_.erase(0, begin);
}

void LinePrefixer::finish() {
  if (!pending_.empty()) emit(0, pending_.size());
  pending_.clear();
}

void LinePrefixer::emit(size_t begin, size_t end) {
  std::string line;
  line.reserve(prefix_.size() + end - begin + 1);
  line.append(prefix_).append(pending_, begin, end - begin).push_back('\n');
  sink_(line);
}

std::string rank_prefix(int rank, bool enabled) {
  return enabled ? "[rank " + std::to_string(rank) + "] " : std::string();
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace distlab::launcher
