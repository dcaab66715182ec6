#include "memory/host_allocator.hpp"

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace distlab::memory {

std::string choose_host_allocator(const char* distlab_host_allocator, const char* glibc_tunables) {
  if (distlab_host_allocator != nullptr && *distlab_host_allocator != '\0') {
    const std::string value = distlab_host_allocator;
    if (value == "glibc") return "glibc";
    if (value != "kept")
      throw std::invalid_argument("DISTLAB_HOST_ALLOCATOR=" + value +
                                  ": not 'kept' (freed memory kept for reuse, the default) or 'glibc' (glibc's defaults)");
  }
  if (glibc_tunables != nullptr) {
    const std::string tunables = glibc_tunables;
    if (tunables.find("glibc.malloc.mmap_threshold") != std::string::npos ||
        tunables.find("glibc.malloc.trim_threshold") != std::string::npos ||
        tunables.find("glibc.malloc.arena_max") != std::string::npos)
      return "tunables";
  }
  return "kept";
}

namespace {

std::string apply_choice() {
  std::string choice;
  try {
    choice = choose_host_allocator(std::getenv("DISTLAB_HOST_ALLOCATOR"), std::getenv("GLIBC_TUNABLES"));
  } catch (const std::invalid_argument& e) {
    // Before main: no exception can reach the program; say it and stop.
    std::fprintf(stderr, "distlab: %s\n", e.what());
    std::exit(2);
  }
  if (choice == "glibc") return "glibc's defaults (DISTLAB_HOST_ALLOCATOR=glibc)";
  if (choice == "tunables") return "GLIBC_TUNABLES's";
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kKeptMmapThreshold));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptTrimThreshold));
  mallopt(M_ARENA_MAX, kKeptArenas);
  return "kept (mmap threshold 32 MiB, trim threshold 1 GiB, one arena)";
}

// Made when libdistlab is loaded, before any tensor is allocated.
const std::string kChoice = apply_choice();

}  // namespace

const std::string& host_allocator_choice() { return kChoice; }

}  // namespace distlab::memory
