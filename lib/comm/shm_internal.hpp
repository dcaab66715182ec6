// What the same-host transport's three parts (shm_process.cpp: the
// process and its Bell; shm_links.cpp: point-to-point through the rings;
// shm_arena.cpp: the native collectives) share: the layout of the pages in
// shared memory and a few helpers. Not part of the library's interface.
#pragma once

#include <ATen/core/Tensor.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "comm/reduce_op.hpp"
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
  // 0: `address` is the tensor. n: a bucket's gradients where they lie
  // (all_reduce_parts): `address` is a table of n Segments, in this
  // process's memory, `bytes` theirs in all.
  std::atomic<uint64_t> segments{0};
  // Set when this rank leaves a one-copy collective because a member's
  // process was gone: that member's world rank + 1 (0: it has not). A
  // member that then finds this rank's process gone, or its table changed,
  // names the rank that started it, not this one (shm_direct.cpp).
  std::atomic<uint64_t> left_for{0};
};

// One contiguous run of bytes in a process's memory.
struct Segment {
  uint64_t address;
  uint64_t bytes;
};

inline uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
// A communicator's segment: its GroupPage, the members' ring controls, the
// rings (one per member writing to this rank), the arena slot.
inline uint64_t group_page_bytes() { return round_up(sizeof(GroupPage), kCacheLine); }
inline uint64_t controls_bytes(int members) { return round_up(members * sizeof(RingControl), kCacheLine); }

inline uint64_t bytes_of(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }
inline uint8_t* bytes_at(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

// Member `rank`'s share of a reduction, `mine`, combined with every other
// member's in rank order (s0 op s1 op ...): the one order the arena and the
// one-copy collectives both keep, so that no digest depends on the path.
// Ranks 0 and 1 work in place (every op is commutative bit for bit, so rank
// 1's s1 op s0 is s0 op s1); a rank past 1 would overwrite its own values
// before their turn, so it sums in `scratch` (mine's shape) and copies back.
// share_of(m) gives member m's values of the share, valid until the next call.
void reduce_in_rank_order(at::Tensor& mine, int rank, int members, ReduceOp op,
                          const std::function<at::Tensor(int)>& share_of, at::Tensor scratch);

// Calls the fault point a test set (set_shm_fault_point), if any.
void reached(const char* point);

// Reads `bytes` at `address` in process `pid` into `into` (one copy,
// process_vm_readv); "" or why not.
std::string read_directly(pid_t pid, void* into, uint64_t address, uint64_t bytes);
// Counts an all-reduce of parts done in place (one_copy_counts()).
void count_parts_all_reduce();

}  // namespace distlab::comm::shm
