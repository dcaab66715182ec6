// The same-host transport's native collectives (comm/shm_links.hpp): a
// communicator whose members all share the host runs barrier, broadcast,
// reduce, all-reduce and all-to-all in its shared arena.
#include "comm/peer_closed.hpp"
#include "comm/shm_links.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "comm/shm_internal.hpp"

namespace distlab::comm {

using shm::bytes_at;
using shm::controls_bytes;
using shm::group_page_bytes;
using shm::GroupPage;

namespace {
constexpr int kAllToAllTag = -1;  // the links' own: programs' tags are >= 0

at::Tensor view_of(uint8_t* where, int64_t elements, at::ScalarType dtype) {
  return at::from_blob(where, {elements}, at::TensorOptions().dtype(dtype));
}
}  // namespace

void shm::reduce_in_rank_order(at::Tensor& mine, int rank, int members, ReduceOp op,
                               const std::function<at::Tensor(int)>& share_of, at::Tensor scratch) {
  if (rank <= 1) {
    for (int m = 0; m < members; ++m)
      if (m != rank) combine_into(mine, share_of(m), op);
    return;
  }
  scratch.copy_(share_of(0));
  for (int m = 1; m < members; ++m) combine_into(scratch, m == rank ? mine : share_of(m), op);
  mine.copy_(scratch);
}

uint8_t* ShmProcess::Links::slot(int member, int half) const {
  const int p = static_cast<int>(world_ranks_.size());
  const ShmSettings& s = process_->settings();
  const SharedSegment& segment = member == rank_ ? mine_ : theirs_[member];
  return static_cast<uint8_t*>(segment.data()) + group_page_bytes() + controls_bytes(p) + p * s.ring_bytes +
         half * (s.arena_bytes / 2);
}

void ShmProcess::Links::barrier(const std::string& what) {
  auto lock = process_->lock();
  const uint64_t g = ++generation_;
  auto page_of = [&](int m) { return static_cast<GroupPage*>(m == rank_ ? mine_.data() : theirs_[m].data()); };
  page_of(rank_)->arrived.store(g, std::memory_order_release);
  for (int q : watched_) process_->ring(q);
  const int p = static_cast<int>(world_ranks_.size());
  auto all_arrived = [&] {
    for (int m = 0; m < p; ++m)
      if (m != rank_ && page_of(m)->arrived.load(std::memory_order_acquire) < g) return false;
    return true;
  };
  bool arrived = false;
  try {
    arrived = process_->wait_locked(lock, all_arrived, timeout_, watched_, what);
  } catch (const PeerClosed&) {
    // A member gone: one that left for another's death names that one
    // (shm_direct.cpp); else this rank says which it leaves for, and goes.
    for (int m = 0; m < p; ++m)
      if (m != rank_) name_why_left(m, what);
    for (int q : watched_)  // the one wait_locked named: the first of watched_ found gone
      if (!process_->alive(q)) {
        leave_for(q);
        break;
      }
    throw;
  }
  if (arrived) return shm::reached("barrier");
  std::string missing;
  for (int m = 0; m < p; ++m)
    if (m != rank_ && page_of(m)->arrived.load() < g)
      missing += (missing.empty() ? "rank " : ", rank ") + std::to_string(world_ranks_[m]);
  throw_timeout(what, timeout_, "Not there yet: " + missing);
}

void ShmProcess::Links::broadcast(at::Tensor& tensor, int root, const std::string& what) {
  if (goes_directly(tensor)) return broadcast_directly(tensor, root, what);
  const int64_t es = tensor.element_size(), n = tensor.numel();
  const int64_t per_chunk = static_cast<int64_t>(process_->settings().arena_bytes / 2) / es;
  uint8_t* data = bytes_at(tensor);
  for (int64_t start = 0; start < n; start += per_chunk) {
    const int64_t c = std::min(per_chunk, n - start);
    const int half = static_cast<int>(chunks_++ % 2);
    if (rank_ == root) std::memcpy(slot(root, half), data + start * es, c * es);
    barrier(what);
    if (rank_ != root) std::memcpy(data + start * es, slot(root, half), c * es);
  }
}

void ShmProcess::Links::reduce(at::Tensor& tensor, int root, ReduceOp op, const std::string& what) {
  if (goes_directly(tensor)) return reduce_directly(tensor, root, op, what);
  reduce_in_arena(tensor, root, op, what);
}

void ShmProcess::Links::all_reduce(at::Tensor& tensor, ReduceOp op, const std::string& what) {
  if (goes_directly(tensor)) return reduce_directly(tensor, -1, op, what);
  reduce_in_arena(tensor, -1, op, what);
}

// Chunk by chunk: every rank copies its chunk into its slot; each reduces
// its share of the chunk over all slots, in rank order, into its own slot
// (in place, the reverted gloo design's reduce-scatter; ranks 0 and 1 need
// no copy of their share to do it: shm::reduce_in_rank_order); then every rank (or the root alone)
// copies every share out. The halves of the arena alternate, so the next
// chunk goes in while the last one's shares are read, with two barriers a
// chunk.
void ShmProcess::Links::reduce_in_arena(at::Tensor& tensor, int root, ReduceOp op, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  const at::ScalarType dtype = tensor.scalar_type();
  const int64_t es = tensor.element_size(), n = tensor.numel();
  const int64_t per_chunk = static_cast<int64_t>(process_->settings().arena_bytes / 2) / es;
  const bool keeps = root < 0 || rank_ == root;
  uint8_t* data = bytes_at(tensor);
  for (int64_t start = 0; start < n; start += per_chunk) {
    const int64_t c = std::min(per_chunk, n - start);
    const int half = static_cast<int>(chunks_++ % 2);
    std::memcpy(slot(rank_, half), data + start * es, c * es);
    barrier(what);
    const int64_t lo = c * rank_ / p, hi = c * (rank_ + 1) / p;
    if (hi > lo) {
      auto share_of = [&](int m) { return view_of(slot(m, half), c, dtype).slice(0, lo, hi); };
      at::Tensor mine = share_of(rank_);
      shm::reduce_in_rank_order(mine, rank_, p, op, share_of, rank_ <= 1 ? at::Tensor() : at::empty_like(mine));
    }
    barrier(what);
    if (!keeps) continue;
    for (int m = 0; m < p; ++m) {
      const int64_t from = c * m / p, to = c * (m + 1) / p;
      std::memcpy(data + (start + from) * es, slot(m, half) + from * es, (to - from) * es);
    }
  }
  if (keeps) finish_average(tensor, op, p);
}

void ShmProcess::Links::all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                                   const std::vector<int64_t>& recv_counts, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  std::vector<WorkPtr> pending;
  int64_t sent = 0, received = 0;
  std::vector<at::Tensor> ins(p);
  for (int m = 0; m < p; ++m) {
    at::Tensor out_block = input.slice(0, sent, sent + send_counts[m]);
    at::Tensor in_block = output.slice(0, received, received + recv_counts[m]);
    sent += send_counts[m];
    received += recv_counts[m];
    if (m == rank_) {
      in_block.copy_(out_block);
      continue;
    }
    const std::string step = what + " with rank " + std::to_string(world_ranks_[m]);
    pending.push_back(isend(out_block, m, kAllToAllTag, step));
    ins[m] = in_block;
    pending.push_back(irecv(ins[m], m, kAllToAllTag, step));
  }
  for (auto& w : pending) w->wait();
}

}  // namespace distlab::comm
