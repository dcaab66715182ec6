// Ring attention's work, ready to draw: the library's RingPlan
// (lib/context_parallel/ring_plan.hpp) placed on the causal attention
// matrix cut into query-chunk x key-chunk blocks. Every block shown is one
// of the plan's BlockWork (who computes it, at which ring step, full,
// diagonal or skipped, how many pairs); nothing is recomputed here. No
// drawing either: the Context parallel panel draws it, the tests probe the
// pixels at these positions.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

#include "colors.hpp"
#include "context_parallel/ring_plan.hpp"

namespace distlab::viz {

inline constexpr Color kSkippedBlockColor = rgb(48, 51, 60);  // keys after the queries: nothing computed
inline constexpr Color kStepOutlineColor = kCursorColor;      // the blocks of the step shown
inline constexpr float kOtherStepDim = 0.65f;  // another step's block: its colour this far towards the canvas

// A rank's colour, here and in the per-rank bars (the chunks' palette).
inline Color rank_color(int rank) { return chunk_color(rank); }

// One layout's plan on its matrix.
struct RingView {
  context_parallel::RingPlan plan;
  int chunks = 0;                   // the matrix is chunks x chunks blocks (C or 2C)
  std::vector<int> grid;            // grid[q * chunks + k]: index in plan.blocks of query chunk q x key chunk k
  std::vector<int64_t> rank_pairs;  // plan.pairs(r), rank by rank

  const context_parallel::BlockWork& block(int q, int k) const { return plan.blocks[grid[q * chunks + k]]; }
  // The busiest rank's pairs over the mean (1: every rank the same); 0
  // when nothing is computed.
  double imbalance() const;
};

// make_ring_plan, its blocks placed on the grid. Throws
// std::invalid_argument from make_ring_plan, or when the plan leaves a
// block of the matrix out or computes one twice.
RingView make_ring_view(context_parallel::Layout layout, int ranks, int64_t length, bool causal);

// The sequence length both layouts split: `wanted` rounded up to a
// multiple of 2C (zigzag's chunks), at least 2C.
int64_t ring_length(int ranks, int64_t wanted);

// A block of the plan is highlighted when it is computed at `step` (-1:
// every step is shown, none highlighted).
inline bool highlighted(const context_parallel::BlockWork& b, int step) { return step >= 0 && b.step == step; }
// Its fill: its rank's colour, dimmed when another step is highlighted;
// a skipped block is grey whatever the step.
Color block_fill(const context_parallel::BlockWork& b, int step);

// Where a matrix lies on the screen: query chunks top to bottom (rows),
// key chunks left to right (columns), square blocks of `cell` pixels.
struct RingMatrix {
  ImVec2 min;
  float cell = 0.0f;
  int chunks = 0;
  ImVec2 cell_min(int q, int k) const { return ImVec2(min.x + k * cell, min.y + q * cell); }
  ImVec2 max() const { return ImVec2(min.x + chunks * cell, min.y + chunks * cell); }
};

// "3,670,016": pairs as a class reads them.
std::string format_count(int64_t n);

}  // namespace distlab::viz
