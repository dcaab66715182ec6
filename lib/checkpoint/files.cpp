#include "checkpoint/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace distlab::checkpoint {
namespace {

constexpr const char* kTemporaryMark = ".tmp-";

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("checkpoint: cannot " + what + " " + path + ": " + std::strerror(errno) +
                           " (is the folder writable and the disk not full?)");
}

std::string folder_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// Closes the descriptor on every path out.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool is_temporary_file(const std::string& name) { return name.find(kTemporaryMark) != std::string::npos; }

void sync_folder(const std::string& folder) {
  Descriptor dir{::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) fail("open the folder", folder);
  if (::fsync(dir.fd) != 0) fail("fsync the folder", folder);
}

void write_file_atomically(const std::string& path, const std::vector<char>& bytes) {
  const std::string temporary = path + kTemporaryMark + std::to_string(::getpid());
  {
    Descriptor file{::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (file.fd < 0) fail("create", temporary);
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(file.fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write", temporary);
      done += static_cast<size_t>(n);
    }
    if (::fsync(file.fd) != 0) fail("fsync", temporary);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("rename " + temporary + " to", path);
  sync_folder(folder_of(path));
}

std::vector<char> read_whole_file(const std::string& path) {
  Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail("open", path);
  std::vector<char> bytes;
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(file.fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("read", path);
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  return bytes;
}

}  // namespace distlab::checkpoint
