// The Context parallel panel: who computes which part of causal attention
// under ring attention, from context_parallel::make_ring_plan.
//
// Contiguous and zigzag side by side for the same ranks C and sequence
// length S. Each is the attention matrix cut into query-chunk x key-chunk
// blocks (C x C, or 2C x 2C), every block coloured by the rank that
// computes it: a full block filled, a diagonal block as its lower
// triangle, a skipped block (keys after the queries) grey. A step control
// (slider, buttons, arrow keys) highlights the blocks of one ring step
// (outlined; the other steps' blocks dimmed). Under each matrix, the pairs
// each rank computes (RingPlan::pairs) as numbers and bars on one scale for
// both layouts, and the busiest rank over the mean.
//
//   contiguous: 4 chunks of 1024 tokens   zigzag: 8 chunks of 512 tokens
//   +--+--+--+--+                          +-+-+-+-+-+-+-+-+
//   |\ |  |  |  |  rank 0                  |\| | | | | | | |
//   +--+--+--+--+                          ...
//   |##|\ |  |  |  rank 1
//   ...
//   rank 0: 524,800 pairs ###              rank 0: 2,097,664 pairs ######
//   rank 3: 3,670,528 pairs ##########     rank 3: 2,097,664 pairs ######
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "options.hpp"
#include "ring_scene.hpp"

namespace distlab::viz {

inline constexpr int kMaxContextRanks = 8;  // C of the ranks control

// What the last frame drew where, for the tests.
struct ContextFrameLayout {
  struct View {
    RingMatrix matrix;
    std::vector<int> highlighted;  // indices into the plan's blocks drawn as the step's, in drawing order
    // Each rank's bar under the matrix: [x0, x1] x [y0, y1], x1 - x0 to one
    // scale for both views (the most pairs of either is the full width).
    std::vector<ImVec2> bar_min, bar_max;
  };
  std::vector<View> views;  // contiguous, zigzag
};

class ContextPanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  // Takes --cp-ranks, --cp-length and --cp-step. Throws
  // std::invalid_argument when the plan cannot be made.
  explicit ContextPanel(const Options& options);

  void draw();

  // The controls, also for the tests. C is clamped to 1..8, the step to
  // -1 (every step) .. C - 1.
  void set_ranks(int ranks);
  void set_length(int64_t tokens);  // rounded up to a multiple of 2C (ring_length)
  void set_causal(bool causal);
  void set_step(int step);
  void step_forward();  // to the next ring step; stays at the last
  void step_back();     // to the one before; from step 0 to every step

  int ranks() const { return ranks_; }
  int64_t length() const { return views_.front().plan.length; }
  int step() const { return step_; }
  const std::vector<RingView>& views() const { return views_; }  // contiguous, zigzag
  const ContextFrameLayout& last_layout() const { return layout_; }

 private:
  void rebuild();
  void draw_controls();
  void draw_view(size_t index, ImVec2 size, int64_t most_pairs);
  void draw_matrix(const RingView& view, ImVec2 min, float side, ContextFrameLayout::View& out);

  int ranks_ = 4;
  int64_t wanted_length_ = 4096;  // what was asked for; the plans use ring_length of it
  bool causal_ = true;
  int step_ = -1;
  std::vector<RingView> views_;
  ContextFrameLayout layout_;
  std::string error_;
  float scale_ = 1.0f;
};

}  // namespace distlab::viz
