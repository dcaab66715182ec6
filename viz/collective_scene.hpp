// A collective on paper, ready to animate: the library's plan and cost
// model, what every rank holds after each step (for all-to-all: where the
// data in each block of each rank's output came from), and where the nodes,
// arrows and blocks go at a given time. No drawing here (the Collectives panel draws
// it; the tests probe the pixels at these positions).
//
// Time runs as the alpha-beta model predicts: step k occupies
// [step_begin_s[k], step_begin_s[k + 1]).
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/plan.hpp"
#include "colors.hpp"
#include "timeline.hpp"

namespace distlab::viz {

struct CollectiveSetup {
  collectives::Collective collective = collectives::Collective::kAllReduce;
  int ranks = 8;
  int64_t bytes = 64 << 20;
  collectives::LinkParams link{5e-6, 1e-10};
  int root = 0;
  // all_to_all: the example counts of uneven_counts() (all-to-all-v)
  // instead of equal blocks.
  bool uneven = false;
};

// all_to_all's example of uneven counts (counts[src * ranks + dst], as
// Plan::counts): rank s sends rank d ((s * d + s + 1) mod 4) x `unit`
// elements, so some ranks send nothing to some others and rank 2 sends
// twice what rank 0 does.
std::vector<int64_t> uneven_counts(int ranks, int64_t unit);

// all_to_all: whose data a block of a rank's output holds: `rank`'s input
// block for `block` (-1, -1: nothing yet).
struct BlockOrigin {
  int rank = -1;
  int block = -1;
  bool operator==(const BlockOrigin& o) const { return rank == o.rank && block == o.block; }
};

// Which ranks' contributions a rank's chunk holds, one bit per rank (a
// broadcast's data counts as every bit: it is the whole result).
using Contributions = uint32_t;

struct AlgorithmRun {
  collectives::Plan plan;
  collectives::Prediction prediction;
  // Size steps + 1: when each step begins, then the end. When the model
  // predicts 0 s in all (alpha = beta = 0) every step gets 1 s so the
  // animation still has something to show (uniform_time is then true).
  std::vector<double> step_begin_s;
  bool uniform_time = false;
  // holdings[k][rank][chunk]: before step k (k = steps: at the end).
  // Empty for all_to_all, whose two buffers are in `outputs`.
  std::vector<std::vector<std::vector<Contributions>>> holdings;
  // all_to_all: outputs[k][rank][s], what rank's output block from rank s
  // holds before step k. Its own block is there from the start (copied,
  // not sent); each transfer fills the block its landing() falls in.
  std::vector<std::vector<std::vector<BlockOrigin>>> outputs;

  double total_s() const { return step_begin_s.back(); }
  int steps() const { return static_cast<int>(plan.steps.size()); }
  // The step running at time t and the fraction of it done: (-1, 0) before
  // the start, (steps, 1) at or after the end.
  std::pair<int, double> step_at(double t) const;
  // The chunks (of plan.parts) a transfer moves.
  std::pair<int, int> chunks_of(const collectives::Transfer& t) const;
};

// Builds the plan (elements of one byte, so any size is exact), prices it,
// and replays it on paper. all_to_all: blocks of bytes / ranks (at least
// 1), equal (make_plan) or setup.uneven's (make_all_to_all_plan). Throws
// std::invalid_argument from make_plan.
AlgorithmRun make_run(const CollectiveSetup& setup, collectives::Algorithm algorithm);

// Every rank's contributions when everything is known.
Contributions all_ranks(int ranks);

struct SceneArrow {
  int src = 0;
  int dst = 0;
  int chunk = -1;  // -1: the whole buffer
  int chunks = 1;
  int64_t bytes = 0;
  bool reduce = false;
  ImVec2 from, to;  // shaft ends, already clear of the nodes
  ImVec2 packet;    // the message, `progress` of the way along
  ImVec2 label_at;  // top-left of the label
  std::string label;
  Color color = 0;
};

struct SceneLayout {
  std::vector<ImVec2> nodes;  // rank r's centre: on a circle, rank 0 on top, clockwise
  float node_radius = 0.0f;
  float cell_size = 0.0f;     // the chunk cells under each node
  int step = -1;
  double progress = 0.0;
  std::vector<SceneArrow> arrows;  // the transfers of `step`, empty before the start and after the end

  // all_to_all: pixels per element of the blocks under each node (the
  // longest buffer is as wide as world_size cells).
  double element_width = 0.0;

  // Top-left of chunk `c`'s cell of rank r.
  ImVec2 cell(int rank, int c, int parts) const;
  // all_to_all: the corners of rank r's input block for `peer` (the upper
  // row) or of its output block from `peer` (the row below), as wide as its
  // elements (zero elements: no width).
  std::pair<ImVec2, ImVec2> block(const collectives::Plan& plan, int rank, bool output, int peer) const;
};

inline constexpr float kArrowThickness = 3.0f;
inline constexpr float kArrowHead = 12.0f;
// Opposite arrows between two ranks (halving-doubling) are drawn side by
// side: each is shifted this far to its own right.
inline constexpr float kArrowOffset = 5.0f;

// Where everything is at time t in the rectangle [min, max]; `scale` (the
// --scale of the text) bounds the size of nodes, cells and gaps.
SceneLayout layout_scene(const AlgorithmRun& run, double t, ImVec2 min, ImVec2 max, float scale = 1.0f);

// "c3: 8 MB", "c2-3: 16 MB" (a block of chunks), "5 MB" (the whole buffer).
std::string transfer_label(int chunk, int chunks, int64_t bytes);

}  // namespace distlab::viz
