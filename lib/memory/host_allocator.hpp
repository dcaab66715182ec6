// Freed host memory kept for the next tensor, instead of given back to the
// system and faulted in again.
//
// glibc's malloc serves a block above its mmap threshold (128 KiB at first)
// with a fresh mmap and unmaps it on free, and trims the top of its heap
// when more than twice that is free. A training step allocates and frees
// the same activations and gradients every step: each comes back as new
// pages, and the kernel zeroes and maps every one of them again (a page
// fault per 4 KiB). On the 2-core VM a third of the test suite's CPU time
// was those faults. PyTorch's CPU tuning guide answers with a caching
// allocator (jemalloc or tcmalloc); DistLab asks glibc for the same with three
// settings, made when libdistlab is loaded:
//   mmap threshold 32 MiB   blocks up to 32 MiB come from the heap
//   trim threshold 1 GiB    up to 1 GiB of freed heap is kept for reuse
//   one arena               every thread allocates from that heap: a
//                           thread's own arena grows in 64 MiB heaps that
//                           glibc unmaps as soon as one is wholly free,
//                           whatever the trim threshold, so a thread rank's
//                           activations came back as new pages every step
// Measured on the 2-core VM: lesson 05 took 28 % less CPU, six of the
// heaviest test programs 23 % less wall time (docs/benchmarks-ratios.md,
// `host.glibc_over_kept`, measures it again); the one arena took the cpu
// preset's step on one thread rank from 230 to 67 ms (bf16, one intra-op
// thread) and from 120 to 81 ms (float32, two). The price: a process keeps
// up to 1 GiB of freed memory in its heap, counted in its RSS, and thread
// ranks take one lock for the blocks their threads' caches do not hold.
//
// DISTLAB_HOST_ALLOCATOR=glibc leaves glibc's defaults; so does a
// GLIBC_TUNABLES that sets any of the three (the user's own choice wins).
#pragma once

#include <cstddef>
#include <string>

namespace distlab::memory {

inline constexpr std::size_t kKeptMmapThreshold = std::size_t{32} << 20;
inline constexpr std::size_t kKeptTrimThreshold = std::size_t{1} << 30;
inline constexpr int kKeptArenas = 1;

// What was chosen when the library was loaded, in one line:
// "kept (mmap threshold 32 MiB, trim threshold 1 GiB, one arena)", "glibc's defaults
// (DISTLAB_HOST_ALLOCATOR=glibc)", "GLIBC_TUNABLES's".
const std::string& host_allocator_choice();

// The choice for these two variables' values (null when unset): "kept",
// "glibc" or "tunables"; throws std::invalid_argument for a
// DISTLAB_HOST_ALLOCATOR that is neither "kept" nor "glibc".
std::string choose_host_allocator(const char* distlab_host_allocator, const char* glibc_tunables);

}  // namespace distlab::memory
