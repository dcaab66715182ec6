#include "comm/host_identity.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>

namespace distlab::comm {
namespace {

std::string first_line_of(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_of(const char* path) {
  char target[256];
  const ssize_t n = readlink(path, target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
}

}  // namespace

std::string host_identity() {
  if (const char* given = std::getenv("DISTLAB_HOST_ID"); given != nullptr && *given != '\0') return given;
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name - 1);
  return std::string(name) + " boot " + first_line_of("/proc/sys/kernel/random/boot_id") + " " +
         link_of("/proc/self/ns/ipc") + " " + link_of("/proc/self/ns/mnt") + " " + link_of("/proc/self/ns/pid");
}

}  // namespace distlab::comm
