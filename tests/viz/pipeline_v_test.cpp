// The Pipeline panel on the V-shaped schedules: ZBV's and DualPipeV's two
// stages of a rank in the rank's one row, DualPipeV's OVERLAP_F_B halves
// marked as one action (and framed on screen), and each schedule's closed
// form beside its simulation.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "app.hpp"
#include "pipeline_panel.hpp"
#include "pipeline_scene.hpp"
#include "render_helpers.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using pipeline::ActionType;
using pipeline::ScheduleKind;
using testing_util::render_in_window;

PipelineSetup setup_of(ScheduleKind kind, int p, int m) {
  PipelineSetup s;
  s.kind = kind;
  s.ranks = p;
  s.microbatches = m;
  s.costs = {1.0, 2.0, 1.0, 0.0};  // F = 1, B = 2, W = 1: F = I = W
  return s;
}

// A rank's row holds exactly its two stages of the V, r and 2p-1-r.
TEST(PipelineV, EachRankRowHoldsItsTwoStages) {
  for (const ScheduleKind kind : {ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV}) {
    const int p = 4;
    const PipelineRun run = simulate_run(setup_of(kind, p, 8));
    for (int r = 0; r < p; ++r) {
      std::set<int> stages;
      for (const ActionBox& b : run.boxes[r]) stages.insert(b.stage);
      EXPECT_EQ(stages, (std::set<int>{r, 2 * p - 1 - r})) << pipeline::kind_name(kind) << " rank " << r;
    }
  }
}

// Every OVERLAP_F_B of a rank's program is two neighbouring boxes, its
// forward then its backward, both naming the action; nothing else is.
TEST(PipelineV, OverlapHalvesAreMarkedInPairs) {
  const PipelineRun run = simulate_run(setup_of(ScheduleKind::kDualPipeV, 4, 8));
  int total = 0;
  for (int r = 0; r < 4; ++r) {
    std::multiset<std::string> want, got;
    for (const pipeline::Action& a : run.schedule.programs[r])
      if (a.type == ActionType::kOverlapFB) want.insert(pipeline::to_string(a));
    const auto& row = run.boxes[r];
    for (size_t k = 0; k < row.size(); ++k) {
      if (row[k].compound.empty()) continue;
      ASSERT_LT(k + 1, row.size());
      EXPECT_EQ(row[k].type, ActionType::kForward) << row[k].compound;
      EXPECT_EQ(row[k + 1].type, ActionType::kBackward) << row[k].compound;
      EXPECT_EQ(row[k + 1].compound, row[k].compound);
      EXPECT_DOUBLE_EQ(row[k].end_s, row[k + 1].begin_s) << "one action: the halves back to back";
      got.insert(row[k].compound);
      ++k;
    }
    EXPECT_EQ(got, want) << "rank " << r;
    total += static_cast<int>(want.size());
  }
  EXPECT_GT(total, 0);
  for (const auto& row : simulate_run(setup_of(ScheduleKind::kZeroBubbleV, 4, 8)).boxes)
    for (const ActionBox& b : row) EXPECT_TRUE(b.compound.empty()) << "ZBV has no compound actions";
}

// The closed form next to the simulation: 1F1B's (p-1)(F+B) is the
// textbook (p-1)/(m+p-1) of the step for any m; DualPipeV's equals the
// simulator where the formula is exact (F = I = W, m >= 2p); LoopedBFS has
// none.
TEST(PipelineV, ClosedFormBesideTheSimulation) {
  for (int m : {1, 4, 8, 13}) {
    const PipelineRun run = simulate_run(setup_of(ScheduleKind::k1F1B, 4, m));
    ASSERT_TRUE(run.closed.has_value());
    EXPECT_NEAR(run.closed->bubble, 3.0 / (m + 3.0), 1e-12) << "m " << m;
    EXPECT_NEAR(run.bubble, 3.0 / (m + 3.0), 1e-9) << "m " << m;
  }
  for (int m : {8, 12, 16}) {
    const PipelineRun run = simulate_run(setup_of(ScheduleKind::kDualPipeV, 4, m));
    ASSERT_TRUE(run.closed.has_value());
    EXPECT_NEAR(run.closed->bubble, run.bubble, 1e-9) << "m " << m << ": " << run.closed->formula;
  }
  PipelineSetup looped = setup_of(ScheduleKind::kLoopedBFS, 4, 8);
  EXPECT_FALSE(simulate_run(looped).closed.has_value());
}

class PipelineVRender : public ::testing::Test {
 protected:
  PipelineVRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

// On screen, an OVERLAP_F_B's frame runs along the top of its row over both
// halves: at the middle of the first pair of rank 0, one pixel below the
// row's top, the frame's colour.
TEST_F(PipelineVRender, OverlapFramedAcrossBothHalves) {
  Options o;
  o.schedule = "dualpipev";
  o.pipeline_stages = 4;
  o.microbatches = 8;
  o.cost_forward = 1.0;
  o.cost_backward = 2.0;
  o.cost_weight = 1.0;
  o.cost_send = 0.0;
  PipelinePanel panel(o);
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const PipelineFrameLayout& layout = panel.last_layout();
  ASSERT_EQ(layout.columns.size(), 1u);
  const auto& column = layout.columns[0];
  const auto& row = panel.runs().at(0).boxes.at(0);
  size_t first = 0;
  while (first < row.size() && row[first].compound.empty()) ++first;
  ASSERT_LT(first + 1, row.size());
  const float x = column.axis.x_of((row[first].begin_s + row[first + 1].end_s) / 2);
  EXPECT_TRUE(COLOR_AT(image, x, column.row_tops[0] + 1.0f, kCompoundColor, 8, 0));
  // A plain forward (not in a compound) has no frame above it.
  size_t plain = 0;
  while (plain < row.size() && !row[plain].compound.empty()) ++plain;
  ASSERT_LT(plain, row.size());
  const float xp = column.axis.x_of((row[plain].begin_s + row[plain].end_s) / 2);
  EXPECT_FALSE(COLOR_AT(image, xp, column.row_tops[0] + 1.0f, kCompoundColor, 8, 0));
}

}  // namespace
}  // namespace distlab::viz
