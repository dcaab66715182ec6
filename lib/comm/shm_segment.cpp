#include "comm/shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "comm/errors.hpp"

namespace distlab::comm {
namespace {

constexpr const char* kPrefix = "distlab.";

[[noreturn]] void fail(const std::string& what, const std::string& name) {
  throw SetupError("shared memory: " + what + " " + name + ": " + std::strerror(errno) +
                   (errno == ENOSPC || errno == ENOMEM ? " (is /dev/shm large enough? df -h /dev/shm)" : ""));
}

}  // namespace

SharedSegment SharedSegment::create(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail("cannot create", name);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int saved = errno;
    close(fd);
    shm_unlink(name.c_str());
    errno = saved;
    fail("cannot size", name);
  }
  return mapped(name, fd, bytes, true);
}

SharedSegment SharedSegment::attach(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) fail("cannot open", name);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    errno = EINVAL;
    fail("unexpected size of", name);
  }
  return mapped(name, fd, bytes, false);
}

SharedSegment SharedSegment::mapped(const std::string& name, int fd, size_t bytes, bool owner) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int saved = errno;
  close(fd);
  if (data == MAP_FAILED) {
    if (owner) shm_unlink(name.c_str());
    errno = saved;
    fail("cannot map", name);
  }
  SharedSegment segment;
  segment.name_ = name;
  segment.data_ = data;
  segment.size_ = bytes;
  segment.owner_ = owner;
  return segment;
}

SharedSegment::~SharedSegment() { release(); }

SharedSegment::SharedSegment(SharedSegment&& other) noexcept { *this = std::move(other); }

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

void SharedSegment::unlink() {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

void SharedSegment::release() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
}

std::string segment_name(const std::string& token, const std::string& what) {
  return "/" + std::string(kPrefix) + std::to_string(getpid()) + "." + token + "." + what;
}

namespace {
// Calls visit(name, pid) for every /dev/shm/distlab.<pid>.* entry.
template <typename Visit>
void each_segment(Visit visit) {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::strlen(kPrefix), nullptr, 10);
    visit(name, pid);
  }
  closedir(dir);
}
}  // namespace

int remove_stale_segments() {
  int removed = 0;
  each_segment([&](const std::string& name, long pid) {
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH && shm_unlink(("/" + name).c_str()) == 0)
      ++removed;
  });
  return removed;
}

int count_segments(const std::string& token) {
  int found = 0;
  each_segment([&](const std::string& name, long) {
    if (name.find("." + token + ".") != std::string::npos) ++found;
  });
  return found;
}

}  // namespace distlab::comm
