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
//
// At the end of the file: DDP's buckets all-reduced where their gradients
// lie, the same three barriers over a table of the parts' addresses.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>

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

void ShmProcess::Links::publish(const void* address, uint64_t bytes, uint64_t segments, const std::string& what) {
  auto* page = static_cast<GroupPage*>(mine_.data());
  page->address.store(reinterpret_cast<uint64_t>(address), std::memory_order_relaxed);
  page->bytes.store(bytes, std::memory_order_relaxed);
  page->segments.store(segments, std::memory_order_relaxed);
  page->left_for.store(0, std::memory_order_relaxed);
  barrier(what);  // its release store of `arrived` publishes them
  const int p = static_cast<int>(world_ranks_.size());
  for (int m = 0; m < p; ++m) {
    if (m == rank_) continue;
    const auto* page = static_cast<GroupPage*>(theirs_[m].data());
    const uint64_t theirs = page->bytes.load(std::memory_order_relaxed);
    if (theirs != bytes)
      throw CommError(what + ": this rank has " + std::to_string(bytes) + " bytes, rank " +
                      std::to_string(world_ranks_[m]) + " " + std::to_string(theirs));
    // Read as a tensor, a table would be other bytes of its process: refused
    // here (all_reduce_parts refuses the other way round, reading the table).
    const uint64_t parts = page->segments.load(std::memory_order_relaxed);
    if (segments == 0 && parts != 0)
      throw CommError(what + ": rank " + std::to_string(world_ranks_[m]) + " is all-reducing parts (" +
                      std::to_string(parts) + " of them), not one tensor of " + std::to_string(bytes) + " bytes");
  }
}

// A rank that finds a member's process gone leaves the collective, and its
// own memory may be gone or reused before a slower member reads it: that
// member must name the rank that died first, not the one that left. So the
// rank that leaves says why in its page first (left_for), and a read that
// fails, or a table that changed, looks there before naming anyone.
void ShmProcess::Links::read_at(int m, uint64_t address, void* into, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return;
  const int world = world_ranks_[m];
  const std::string why = shm::read_directly(process_->pid_of(world), into, address, bytes);
  if (why.empty()) return;
  name_why_left(m, what);
  leave_for(world);
  throw PeerClosed(what + ": reading rank " + std::to_string(world) + "'s tensor (process " +
                   std::to_string(process_->pid_of(world)) + "): " + why);
}

void ShmProcess::Links::leave_for(int world_rank) {
  static_cast<GroupPage*>(mine_.data())->left_for.store(static_cast<uint64_t>(world_rank) + 1, std::memory_order_release);
}

void ShmProcess::Links::name_why_left(int m, const std::string& what) {
  const uint64_t left_for = static_cast<const GroupPage*>(theirs_[m].data())->left_for.load(std::memory_order_acquire);
  if (left_for == 0) return;
  const int gone = static_cast<int>(left_for - 1);
  leave_for(gone);
  throw PeerClosed(what + ": " + process_->exited_text(gone) + " (found by rank " + std::to_string(world_ranks_[m]) +
                   ", which then left the collective)");
}

void ShmProcess::Links::read_from(int m, uint64_t offset, void* into, uint64_t bytes, const std::string& what) {
  const auto* page = static_cast<GroupPage*>(theirs_[m].data());
  read_at(m, page->address.load(std::memory_order_relaxed) + offset, into, bytes, what);
}

void ShmProcess::Links::reduce_range(at::Tensor mine, int64_t whole, ReduceOp op, double scale,
                                     const ReadShare& read) {
  const int p = static_cast<int>(world_ranks_.size());
  const int64_t es = mine.element_size(), n = mine.numel();
  const int64_t per_piece = std::max<int64_t>(1, kPieceBytes / es);
  const at::Tensor factor = at::native::wrapped_scalar_tensor(scale);
  at::Tensor theirs = at::empty({std::min(per_piece, std::max<int64_t>(n, 1))}, mine.options());
  at::Tensor sum = rank_ <= 1 ? at::Tensor() : at::empty_like(theirs);
  for (int64_t start = 0; start < n; start += per_piece) {
    const int64_t c = std::min(per_piece, n - start);
    at::Tensor piece = mine.slice(0, start, start + c), in = theirs.slice(0, 0, c);
    if (scale != 1.0) piece.mul_(factor);
    auto read_share_of = [&](int m) {
      read(m, static_cast<uint64_t>((whole + start) * es), bytes_at(in), static_cast<uint64_t>(c * es));
      if (scale != 1.0) in.mul_(factor);
      return in;
    };
    shm::reduce_in_rank_order(piece, rank_, p, op, read_share_of, sum.defined() ? sum.slice(0, 0, c) : at::Tensor());
  }
}

void ShmProcess::Links::reduce_directly(at::Tensor& tensor, int root, ReduceOp op, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  const int64_t es = tensor.element_size(), n = tensor.numel();
  at::Tensor flat = tensor.view({-1});
  publish(tensor, what);
  const ReadShare read = [&](int m, uint64_t offset, uint8_t* into, uint64_t bytes) {
    read_from(m, offset, into, bytes, what);
  };
  if (root >= 0) {
    // A reduce leaves the other ranks' tensors as they were: the root
    // reduces every element itself.
    if (rank_ == root) reduce_range(flat, 0, op, 1.0, read);
    barrier(what);
    if (rank_ == root) finish_average(tensor, op, p);
    return;
  }
  // 2. My share, in my own tensor.
  const int64_t lo = n * rank_ / p, hi = n * (rank_ + 1) / p;
  reduce_range(flat.slice(0, lo, hi), lo, op, 1.0, read);
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


// ------------------------------------------------ a bucket where it lies
//
// DDP's bucket all-reduced with no bucket (Communicator::native_all_reduce_parts):
// the same three barriers as reduce_directly, over a table of the parts'
// addresses in place of one tensor's. Rank r reduces share r of the parts
// taken as one tensor, each value times `scale` first (so the copy into a
// bucket and the multiply are one pass, in the caches), then reads every
// other share straight into its own parts. Per rank and byte of gradient,
// against a bucket reduced in one copy: no copy in (a read and a write of
// every byte), no copy out (the same again), and the other shares written
// once, into .grad, not into the bucket and then out of it.

bool ShmProcess::Links::all_reduces_parts_in_place(uint64_t bytes) const {
  return readable_ && bytes >= process_->settings().single_copy_from;
}

namespace {
// `bytes` bytes at `offset` of the parts in `table` taken as one run: the
// runs of each part they cover, in order, as (address, bytes, offset of
// the first byte from `offset`).
template <typename Each>
void for_each_run(const std::vector<shm::Segment>& table, uint64_t offset, uint64_t bytes, Each&& each) {
  uint64_t start = 0, done = 0;
  for (const shm::Segment& part : table) {
    if (done == bytes) return;
    const uint64_t end = start + part.bytes;
    if (offset + done < end) {
      const uint64_t from = offset + done - start, take = std::min(bytes - done, part.bytes - from);
      each(part.address + from, take, done);
      done += take;
    }
    start = end;
  }
}
}  // namespace

void ShmProcess::Links::all_reduce_parts(const std::vector<at::Tensor>& parts, double scale, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  table_.clear();
  uint64_t total = 0;
  for (const at::Tensor& part : parts) {
    table_.push_back({reinterpret_cast<uint64_t>(bytes_at(part)), bytes_of(part)});
    total += table_.back().bytes;
  }
  // 1. Every rank publishes its table (it stays as it is until the next call).
  publish(table_.data(), total, table_.size(), what);
  std::vector<std::vector<shm::Segment>> tables(p);
  for (int m = 0; m < p; ++m) {
    if (m == rank_) continue;
    const auto* page = static_cast<GroupPage*>(theirs_[m].data());
    tables[m].resize(page->segments.load(std::memory_order_relaxed));
    read_at(m, page->address.load(std::memory_order_relaxed), tables[m].data(),
            tables[m].size() * sizeof(shm::Segment), what);
    uint64_t theirs = 0;
    for (const shm::Segment& part : tables[m]) theirs += part.bytes;
    if (theirs != total) {  // a rank in another collective, or none: its table is not one
      name_why_left(m, what);
      throw CommError(what + ": rank " + std::to_string(world_ranks_[m]) + " is not all-reducing parts of " +
                      std::to_string(total) + " bytes (its table holds " + std::to_string(theirs) + ")");
    }
  }
  const ReadShare read_run = [&](int m, uint64_t offset, uint8_t* into, uint64_t bytes) {
    for_each_run(tables[m], offset, bytes, [&](uint64_t address, uint64_t n, uint64_t at) {
      read_at(m, address, into + at, n, what);
    });
  };
  // Each of my parts' elements within [lo, hi) of the whole, as
  // (its part's flat view, its first element there, the whole's first element, count).
  const int64_t es = parts.front().element_size(), n = static_cast<int64_t>(total) / es;
  auto for_each_of_mine = [&](int64_t lo, int64_t hi, auto&& each) {
    int64_t start = 0;
    for (const at::Tensor& part : parts) {
      const int64_t end = start + part.numel(), a = std::max(lo, start), b = std::min(hi, end);
      if (a < b) each(part.view({-1}), a - start, a, b - a);
      start = end;
    }
  };

  // 2. My share, part by part, in my own parts.
  for_each_of_mine(n * rank_ / p, n * (rank_ + 1) / p,
                   [&](const at::Tensor& flat, int64_t first, int64_t whole, int64_t count) {
    reduce_range(flat.slice(0, first, first + count), whole, ReduceOp::kSum, scale, read_run);
  });
  barrier(what);
  // 3. Every other share, out of its owner's parts into mine.
  for (int m = 0; m < p; ++m) {
    if (m == rank_) continue;
    for_each_of_mine(n * m / p, n * (m + 1) / p,
                     [&](const at::Tensor& flat, int64_t first, int64_t whole, int64_t count) {
      read_run(m, static_cast<uint64_t>(whole * es), bytes_at(flat) + first * es, static_cast<uint64_t>(count * es));
    });
  }
  barrier(what);
  shm::count_parts_all_reduce();
}

}  // namespace distlab::comm
