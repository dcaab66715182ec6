// The same-host transport's large collectives in one copy (comm/shm_links.hpp):
// no arena, no chunks going round it. Every rank publishes where its tensor is
// and reads what it needs straight out of the other ranks' processes
// (process_vm_readv), the way a large send goes in one copy.
//
// An all-reduce on p ranks, three barriers in all (a reduce: two, the root
// reducing every element itself, since the others' tensors stay as they are):
//   1. every rank publishes its tensor's address;
//   2. rank r reduces share r (the r-th p-th of the elements) into its own
//      tensor, in rank order, reading the other ranks' values of that share
//      a piece at a time (a piece stays in the caches while it is added);
//   3. every rank reads every other share, now reduced, out of its owner.
// The last barrier keeps each tensor as it is until every reader is done.
// Against the arena (two barriers and three copies a 2 MiB chunk) it moves
// each byte fewer times and waits 3 times, not 2 x bytes / 2 MiB times;
// measured faster on 2 ranks, no faster on 4 (each piece read from every
// other rank by a system call), so by default groups of 2 take it
// (ShmSettings::direct_ranks).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "comm/peer_closed.hpp"
#include "comm/shm_internal.hpp"
#include "comm/shm_links.hpp"

namespace distlab::comm {

using shm::bytes_at;
using shm::bytes_of;
using shm::GroupPage;

namespace {
// The reduction's piece: small enough to stay in a core's caches.
constexpr int64_t kPieceBytes = 256 << 10;
}  // namespace

bool ShmProcess::Links::goes_directly(const at::Tensor& tensor) const {
  return direct_ && bytes_of(tensor) >= process_->settings().single_copy_from;
}

void ShmProcess::Links::publish(const at::Tensor& tensor, const std::string& what) {
  auto* page = static_cast<GroupPage*>(mine_.data());
  page->address.store(reinterpret_cast<uint64_t>(bytes_at(tensor)), std::memory_order_relaxed);
  page->bytes.store(bytes_of(tensor), std::memory_order_relaxed);
  barrier(what);  // its release store of `arrived` publishes both
  const int p = static_cast<int>(world_ranks_.size());
  for (int m = 0; m < p; ++m) {
    if (m == rank_) continue;
    const uint64_t theirs = static_cast<GroupPage*>(theirs_[m].data())->bytes.load(std::memory_order_relaxed);
    if (theirs != bytes_of(tensor))
      throw CommError(what + ": this rank has " + std::to_string(bytes_of(tensor)) + " bytes, rank " +
                      std::to_string(world_ranks_[m]) + " " + std::to_string(theirs));
  }
}

void ShmProcess::Links::read_from(int m, uint64_t offset, void* into, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return;
  const auto* page = static_cast<GroupPage*>(theirs_[m].data());
  const int world = world_ranks_[m];
  const std::string why =
      shm::read_directly(process_->pid_of(world), into, page->address.load(std::memory_order_relaxed) + offset, bytes);
  if (!why.empty())
    throw PeerClosed(what + ": reading rank " + std::to_string(world) + "'s tensor (process " +
                     std::to_string(process_->pid_of(world)) + "): " + why);
}

void ShmProcess::Links::reduce_range(at::Tensor& flat, int64_t lo, int64_t hi, ReduceOp op, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  const int64_t es = flat.element_size();
  const int64_t per_piece = std::max<int64_t>(1, kPieceBytes / es);
  at::Tensor theirs = at::empty({std::min(per_piece, std::max<int64_t>(hi - lo, 1))}, flat.options());
  at::Tensor sum = rank_ <= 1 ? at::Tensor() : at::empty_like(theirs);
  for (int64_t start = lo; start < hi; start += per_piece) {
    const int64_t c = std::min(per_piece, hi - start);
    at::Tensor mine = flat.slice(0, start, start + c), in = theirs.slice(0, 0, c);
    auto read_share_of = [&](int m) {
      read_from(m, start * es, bytes_at(in), c * es, what);
      return in;
    };
    shm::reduce_in_rank_order(mine, rank_, p, op, read_share_of, sum.defined() ? sum.slice(0, 0, c) : at::Tensor());
  }
}

void ShmProcess::Links::reduce_directly(at::Tensor& tensor, int root, ReduceOp op, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  const int64_t es = tensor.element_size(), n = tensor.numel();
  at::Tensor flat = tensor.view({-1});
  publish(tensor, what);
  if (root >= 0) {
    // A reduce leaves the other ranks' tensors as they were: the root
    // reduces every element itself.
    if (rank_ == root) reduce_range(flat, 0, n, op, what);
    barrier(what);
    if (rank_ == root) finish_average(tensor, op, p);
    return;
  }
  // 2. My share, in my own tensor.
  reduce_range(flat, n * rank_ / p, n * (rank_ + 1) / p, op, what);
  barrier(what);
  // 3. Every other share, out of its owner.
  for (int m = 0; m < p; ++m) {
    if (m == rank_) continue;
    const int64_t from = n * m / p, to = n * (m + 1) / p;
    read_from(m, from * es, bytes_at(tensor) + from * es, (to - from) * es, what);
  }
  barrier(what);
  finish_average(tensor, op, p);
}

void ShmProcess::Links::broadcast_directly(at::Tensor& tensor, int root, const std::string& what) {
  publish(tensor, what);
  if (rank_ != root) read_from(root, 0, bytes_at(tensor), bytes_of(tensor), what);
  barrier(what);
}

}  // namespace distlab::comm
