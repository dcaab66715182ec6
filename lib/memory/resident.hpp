// The process's peak resident memory, as the kernel counts it for this
// program (/proc/self/status VmHWM: the high-water mark of this image's
// pages, from its exec on). A parent's rusage (ru_maxrss of wait4) counts
// the pages the child had before its exec as well, the forking parent's
// included: past a parent of 500 MB every child looks 500 MB large.
#pragma once

#include <cstdint>

namespace distlab::memory {

// Bytes; -1 where /proc is not there to say.
int64_t resident_peak_bytes();

}  // namespace distlab::memory
