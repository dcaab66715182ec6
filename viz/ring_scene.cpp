// Ring attention's plan on the attention matrix (see ring_scene.hpp).
#include "ring_scene.hpp"

#include <algorithm>
#include <stdexcept>

namespace distlab::viz {

using context_parallel::BlockWork;
using context_parallel::Cover;

double RingView::imbalance() const {
  int64_t total = 0;
  int64_t most = 0;
  for (int64_t pairs : rank_pairs) {
    total += pairs;
    most = std::max(most, pairs);
  }
  if (total == 0) return 0.0;
  return static_cast<double>(most) * static_cast<double>(rank_pairs.size()) / static_cast<double>(total);
}

RingView make_ring_view(context_parallel::Layout layout, int ranks, int64_t length, bool causal) {
  RingView view;
  view.plan = context_parallel::make_ring_plan(layout, ranks, length, causal);
  view.chunks = context_parallel::chunk_count(layout, ranks);
  view.grid.assign(static_cast<size_t>(view.chunks) * view.chunks, -1);
  for (size_t i = 0; i < view.plan.blocks.size(); ++i) {
    const BlockWork& b = view.plan.blocks[i];
    int& slot = view.grid[static_cast<size_t>(b.q_chunk) * view.chunks + b.k_chunk];
    if (slot >= 0)
      throw std::invalid_argument("ring plan computes query chunk " + std::to_string(b.q_chunk) + " x key chunk " +
                                  std::to_string(b.k_chunk) + " twice");
    slot = static_cast<int>(i);
  }
  if (std::find(view.grid.begin(), view.grid.end(), -1) != view.grid.end())
    throw std::invalid_argument("ring plan leaves a block of the attention matrix out");
  for (int r = 0; r < ranks; ++r) view.rank_pairs.push_back(view.plan.pairs(r));
  return view;
}

int64_t ring_length(int ranks, int64_t wanted) {
  const int64_t unit = 2 * static_cast<int64_t>(std::max(1, ranks));
  return std::max(unit, (wanted + unit - 1) / unit * unit);
}

Color block_fill(const BlockWork& b, int step) {
  if (b.cover == Cover::kSkipped) return kSkippedBlockColor;
  const Color own = rank_color(b.rank);
  return step >= 0 && b.step != step ? mix(own, kCanvasColor, kOtherStepDim) : own;
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<size_t>(at), ",");
  return n < 0 ? "-" + digits : digits;
}

}  // namespace distlab::viz
