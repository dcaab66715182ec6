#include "context_parallel/ring_plan.hpp"

#include <algorithm>

#include <stdexcept>
#include <string>

namespace distlab::context_parallel {

const char* to_string(Layout layout) { return layout == Layout::kZigzag ? "zigzag" : "contiguous"; }

const char* to_string(Cover cover) {
  switch (cover) {
    case Cover::kSkipped: return "skipped";
    case Cover::kDiagonal: return "diagonal";
    case Cover::kFull: return "full";
  }
  return "?";
}

int chunk_count(Layout layout, int ranks) { return layout == Layout::kZigzag ? 2 * ranks : ranks; }

std::vector<int> chunks_of(Layout layout, int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument("context parallelism: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  if (layout == Layout::kContiguous) return {rank};
  return {rank, 2 * ranks - 1 - rank};
}

int64_t RingPlan::pairs(int rank, int step) const {
  int64_t total = 0;
  for (const BlockWork& b : blocks)
    if (b.rank == rank && b.step == step) total += b.pairs;
  return total;
}

int64_t RingPlan::pairs(int rank) const {
  int64_t total = 0;
  for (const BlockWork& b : blocks)
    if (b.rank == rank) total += b.pairs;
  return total;
}

int64_t RingPlan::ring_time() const {
  int64_t time = 0;
  for (int step = 0; step < ranks; ++step) {
    int64_t busiest = 0;
    for (int rank = 0; rank < ranks; ++rank) busiest = std::max(busiest, pairs(rank, step));
    time += busiest;
  }
  return time;
}

double RingPlan::balanced_time() const {
  int64_t all = 0;
  for (const BlockWork& b : blocks) all += b.pairs;
  return static_cast<double>(all) / ranks;
}

int64_t chunk_length(Layout layout, int ranks, int64_t length) {
  if (ranks < 1) throw std::invalid_argument("context parallelism needs at least 1 rank");
  const int pieces = chunk_count(layout, ranks);
  if (length % pieces != 0)
    throw std::invalid_argument(std::string("context parallelism, ") + to_string(layout) + ": a sequence of " +
                                std::to_string(length) + " tokens does not split into " + std::to_string(pieces) +
                                " equal chunks" + (layout == Layout::kZigzag ? " (2C for C ranks)" : "") +
                                "; choose a length that is a multiple of " + std::to_string(pieces));
  return length / pieces;
}

RingPlan make_ring_plan(Layout layout, int ranks, int64_t length, bool causal) {
  const int64_t c = chunk_length(layout, ranks, length);
  RingPlan plan;
  plan.layout = layout;
  plan.ranks = ranks;
  plan.length = length;
  plan.causal = causal;
  plan.chunk = c;
  for (int r = 0; r < ranks; ++r)
    for (int s = 0; s < ranks; ++s)
      for (int q : chunks_of(layout, ranks, r))
        for (int k : chunks_of(layout, ranks, plan.held_from(r, s))) {
          const Cover cover = !causal || k < q ? Cover::kFull : k == q ? Cover::kDiagonal : Cover::kSkipped;
          const int64_t pairs = cover == Cover::kFull ? c * c : cover == Cover::kDiagonal ? c * (c + 1) / 2 : 0;
          plan.blocks.push_back({r, s, q, k, cover, pairs});
        }
  return plan;
}

}  // namespace distlab::context_parallel
