// What the same-host transport's three parts (shm_process.cpp: the
// process and its Bell; shm_links.cpp: point-to-point through the rings;
// shm_arena.cpp: the native collectives) share: the layout of the pages in
// shared memory and a few helpers. Not part of the library's interface.
#pragma once

#include <ATen/core/Tensor.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "comm/shm_sync.hpp"

namespace distlab::comm::shm {

constexpr uint64_t kMagic = 0x64697374'6c616231;  // "distlab1"

// The start of a communicator's segment: where each member says which
// barrier it reached.
struct GroupPage {
  uint64_t magic = kMagic;
  alignas(kCacheLine) std::atomic<uint64_t> arrived{0};  // the last barrier this rank reached
  // A collective in one copy (shm_direct.cpp): where this rank's tensor is
  // and how many bytes it holds, published before the barrier that starts it.
  std::atomic<uint64_t> address{0};
  std::atomic<uint64_t> bytes{0};
};

inline uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
// A communicator's segment: its GroupPage, the members' ring controls, the
// rings (one per member writing to this rank), the arena slot.
inline uint64_t group_page_bytes() { return round_up(sizeof(GroupPage), kCacheLine); }
inline uint64_t controls_bytes(int members) { return round_up(members * sizeof(RingControl), kCacheLine); }

inline uint64_t bytes_of(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }
inline uint8_t* bytes_at(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

// Reads `bytes` at `address` in process `pid` into `into` (one copy,
// process_vm_readv); "" or why not.
std::string read_directly(pid_t pid, void* into, uint64_t address, uint64_t bytes);

}  // namespace distlab::comm::shm
