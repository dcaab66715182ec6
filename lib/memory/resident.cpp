#include "memory/resident.hpp"

#include <fstream>
#include <string>

namespace distlab::memory {

int64_t resident_peak_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:    123456 kB"
  return -1;
}

}  // namespace distlab::memory
