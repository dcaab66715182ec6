// The Collectives panel: plans replayed on paper end where each collective's
// definition says, the slides' numbers come out of the cost model, the
// scene's geometry holds, and the headless render has nodes, arrows, the
// schedule's boxes and the time cursor at the computed positions.
#include <gtest/gtest.h>
#include <imgui.h>

#include <cmath>

#include "app.hpp"
#include "collectives_panel.hpp"
#include "render_helpers.hpp"

namespace distlab::viz {
namespace {

using collectives::Algorithm;
using collectives::Collective;
using namespace testing_util;

CollectiveSetup setup(Collective c, int ranks, int64_t bytes = 1 << 20) {
  CollectiveSetup s;
  s.collective = c;
  s.ranks = ranks;
  s.bytes = bytes;
  s.link = collectives::LinkParams{1e-5, 1e-9};
  return s;
}

TEST(CollectiveScene, EveryPlanEndsWithWhatItsCollectiveDefines) {
  for (Collective c : {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce}) {
    for (Algorithm a : collectives::algorithms_for(c)) {
      for (int p = 2; p <= 16; ++p) {
        for (int root : {0, p - 1}) {
          CollectiveSetup s = setup(c, p);
          s.root = c == Collective::kAllReduce ? 0 : root;
          const AlgorithmRun run = make_run(s, a);
          const auto& end = run.holdings.back();
          ASSERT_EQ(run.holdings.size(), run.plan.steps.size() + 1);
          for (int r = 0; r < p; ++r) {
            const bool must_have_all = c != Collective::kReduce || r == s.root;
            if (!must_have_all) continue;
            for (Contributions have : end[r])
              EXPECT_EQ(have, all_ranks(p)) << collectives::to_string(c) << " " << collectives::to_string(a)
                                            << " p=" << p << " rank " << r;
          }
        }
      }
    }
  }
}

TEST(CollectiveScene, TheSlidesFiveMegabytesToSevenFriends) {
  // 5 MB at 1 MB/s is 5 s a message. One after another: 7 x 5 = 35 s; as a
  // binomial tree: 3 rounds (1, 2, 4 receivers) x 5 s = 15 s.
  Options o;
  o.preset = "friends";
  apply_preset(o);
  CollectivesPanel panel(o);
  ASSERT_EQ(panel.runs().size(), 2u);
  EXPECT_EQ(panel.runs()[0].plan.algorithm, Algorithm::kSequential);
  EXPECT_NEAR(panel.runs()[0].total_s(), 35.0, 1e-9);
  EXPECT_EQ(panel.runs()[0].steps(), 7);
  EXPECT_NEAR(panel.runs()[1].total_s(), 15.0, 1e-9);
  EXPECT_EQ(panel.runs()[1].steps(), 3);
  EXPECT_NEAR(panel.end_s(), 35.0, 1e-9);
}

TEST(CollectiveScene, TimeMapsToStepsAsTheModelPredicts) {
  const AlgorithmRun run = make_run(setup(Collective::kAllReduce, 6), Algorithm::kRing);
  double sum = 0.0;
  for (int k = 0; k < run.steps(); ++k) {
    EXPECT_NEAR(run.step_begin_s[k], sum, 1e-12);
    sum += run.prediction.step_seconds[k];
    const double middle = 0.5 * (run.step_begin_s[k] + run.step_begin_s[k + 1]);
    EXPECT_EQ(run.step_at(middle).first, k);
    EXPECT_NEAR(run.step_at(middle).second, 0.5, 1e-9);
  }
  EXPECT_NEAR(run.total_s(), run.prediction.total_seconds, 1e-12);
  EXPECT_EQ(run.step_at(-1.0).first, -1);
  EXPECT_EQ(run.step_at(run.total_s()).first, run.steps());
}

TEST(CollectiveScene, FreeLinksStillAnimateOneSecondPerStep) {
  CollectiveSetup s = setup(Collective::kBroadcast, 8);
  s.link = collectives::LinkParams{0.0, 0.0};
  const AlgorithmRun run = make_run(s, Algorithm::kTree);
  EXPECT_TRUE(run.uniform_time);
  EXPECT_DOUBLE_EQ(run.total_s(), 3.0);
}

TEST(CollectiveScene, NodesOnACircleAndArrowsLeaveTheirSender) {
  const AlgorithmRun run = make_run(setup(Collective::kAllReduce, 8), Algorithm::kHalvingDoubling);
  const ImVec2 min(100, 50), max(700, 650);
  const double t = 0.5 * (run.step_begin_s[0] + run.step_begin_s[1]);
  const SceneLayout s = layout_scene(run, t, min, max);
  ASSERT_EQ(s.nodes.size(), 8u);
  float cx = 0, cy = 0;
  for (const ImVec2& n : s.nodes) cx += n.x / 8, cy += n.y / 8;
  const float radius = std::hypot(s.nodes[0].x - cx, s.nodes[0].y - cy);
  for (const ImVec2& n : s.nodes) {
    EXPECT_NEAR(std::hypot(n.x - cx, n.y - cy), radius, 0.01f);
    EXPECT_GE(n.y, s.nodes[0].y - 0.01f);  // rank 0 on top
    EXPECT_TRUE(n.x > min.x && n.x < max.x && n.y > min.y && n.y < max.y);
  }
  ASSERT_EQ(s.arrows.size(), run.plan.steps[0].transfers.size());
  for (const SceneArrow& a : s.arrows) {
    const ImVec2 src = s.nodes[a.src], dst = s.nodes[a.dst];
    EXPECT_LT(std::hypot(a.from.x - src.x, a.from.y - src.y), s.node_radius + 4 + kArrowOffset + 0.5f);
    EXPECT_LT(std::hypot(a.to.x - dst.x, a.to.y - dst.y), s.node_radius + 4 + kArrowOffset + 0.5f);
    // Halfway through the step the packet is halfway along.
    EXPECT_NEAR(a.packet.x, (a.from.x + a.to.x) / 2, 0.5f);
    EXPECT_NEAR(a.packet.y, (a.from.y + a.to.y) / 2, 0.5f);
  }
  // Opposite arrows of an exchange do not lie on each other.
  for (const SceneArrow& a : s.arrows)
    for (const SceneArrow& b : s.arrows)
      if (a.src == b.dst && a.dst == b.src) {
        EXPECT_GT(std::hypot(a.from.x - b.to.x, a.from.y - b.to.y), 2 * kArrowOffset - 0.5f);
      }
}

TEST(CollectivesPanelTest, StepButtonsVisitEveryBoundaryOfEveryAlgorithm) {
  Options o;
  o.preset = "friends";
  apply_preset(o);
  CollectivesPanel panel(o);
  // Boundaries: sequential every 5 s to 35, tree every 5 s to 15: 0, 5, ..., 35.
  std::vector<double> visited;
  for (int i = 0; i < 10; ++i) {
    panel.step_forward();
    visited.push_back(panel.cursor().time_s);
  }
  const std::vector<double> want = {5, 10, 15, 20, 25, 30, 35, 35, 35, 35};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(visited[i], want[i], 1e-9);
  panel.step_back();
  EXPECT_NEAR(panel.cursor().time_s, 30.0, 1e-9);
  panel.set_step(2);  // middle of the sequential broadcast's third step
  EXPECT_NEAR(panel.cursor().time_s, 12.5, 1e-9);
}

TEST(CollectivesPanelTest, RefusesWhatCannotBeShown) {
  Options o;
  o.collective = "broadcast";
  o.algorithms = "ring";
  EXPECT_THROW(CollectivesPanel{o}, std::invalid_argument);
  o.collective = "all_reduce";
  o.algorithms = "ring,tree";
  EXPECT_THROW(CollectivesPanel{o}, std::invalid_argument);
  o.algorithms = "ring,ring,ring,ring";
  EXPECT_THROW(CollectivesPanel{o}, std::invalid_argument);
  o.algorithms = "bogus";
  EXPECT_THROW(CollectivesPanel{o}, std::invalid_argument);
}

TEST(CollectivesPanelTest, PlayingRunsTheClockAndStopsAtTheEnd) {
  TimeCursor c;
  c.playing = true;
  c.run_wall_s = 10.0;
  c.advance(1.0, 35.0);  // a tenth of the wall time is a tenth of the run
  EXPECT_NEAR(c.time_s, 3.5, 1e-9);
  c.advance(100.0, 35.0);
  EXPECT_DOUBLE_EQ(c.time_s, 35.0);
  EXPECT_FALSE(c.playing);
}

class CollectivesRender : public ::testing::Test {
 protected:
  CollectivesRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

TEST_F(CollectivesRender, NodesArrowsScheduleAndCursorWhereTheLayoutSays) {
  Options o;
  o.collective = "all_reduce";
  o.algorithms = "ring,halving_doubling";
  o.ranks = 8;
  o.step = 2;  // the third ring step, halfway through
  CollectivesPanel panel(o);
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const CollectivesFrameLayout& layout = panel.last_layout();
  ASSERT_EQ(layout.columns.size(), 2u);

  const AlgorithmRun& ring = panel.runs()[0];
  const auto& col = layout.columns[0];
  const double t = panel.cursor().time_s;
  EXPECT_EQ(col.scene.step, 2);
  // Nodes: below the rank number, inside the disc.
  for (int r = 0; r < 8; ++r) {
    const ImVec2 n = col.scene.nodes[r];
    EXPECT_TRUE(COLOR_AT(image, n.x, n.y + col.scene.node_radius * 0.65f, kNodeColor, 2, 0)) << "rank " << r;
  }
  // The ring's third step: every rank sends one chunk to its right neighbour.
  ASSERT_EQ(col.scene.arrows.size(), 8u);
  for (const SceneArrow& a : col.scene.arrows) {
    EXPECT_EQ(a.dst, (a.src + 1) % 8);
    const Color want = chunk_color(a.chunk);
    const float f = 0.2f;  // on the shaft, clear of the label (middle) and the packet
    EXPECT_TRUE(COLOR_AT(image, a.from.x + (a.to.x - a.from.x) * f, a.from.y + (a.to.y - a.from.y) * f, want, 3, 0))
        << a.src << "->" << a.dst;
    EXPECT_TRUE(COLOR_AT(image, a.packet.x, a.packet.y, want, 3, 0));
  }
  // The middle of the ring is empty.
  const ImVec2 centre((col.scene_min.x + col.scene_max.x) / 2, (col.scene.nodes[0].y + col.scene.nodes[4].y) / 2);
  EXPECT_TRUE(COLOR_AT(image, centre.x, centre.y, kCanvasColor, 2, 0));

  // The schedule below: rank 3's box of that step, in the colour of the
  // chunk the plan has it send, and the cursor at t on the same time axis.
  const int rank = 3;
  int sent_chunk = -2;
  for (const auto& transfer : ring.plan.steps[2].transfers)
    if (transfer.src == rank) sent_chunk = transfer.chunk;
  ASSERT_GE(sent_chunk, 0);
  const float y = col.row_tops[rank] + kPlanRowHeight * 0.5f;
  const float box_right = col.axis.x_of(ring.step_begin_s[3]);
  EXPECT_TRUE(COLOR_AT(image, box_right - 4, y, chunk_color(sent_chunk), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, col.axis.x_of(t), y + 6, kCursorColor, 2, 1));
  // The other column's cursor is at the same time: one cursor for all.
  const auto& other = layout.columns[1];
  EXPECT_TRUE(COLOR_AT(image, other.axis.x_of(t), other.row_tops[0] + kPlanRowHeight * 0.5f + 6, kCursorColor, 2, 1));
}

TEST_F(CollectivesRender, BroadcastRootStandsOutAndTreeStepsShowTheirArrows) {
  Options o;
  o.preset = "friends";
  apply_preset(o);
  o.time_s = 12.5;  // tree step 3 (0-based 2) halfway: ranks 0..3 send to 4..7
  CollectivesPanel panel(o);
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const auto& tree = panel.last_layout().columns[1];
  EXPECT_EQ(tree.scene.step, 2);
  const ImVec2 root = tree.scene.nodes[0];
  EXPECT_TRUE(COLOR_AT(image, root.x, root.y + tree.scene.node_radius * 0.65f, kNodeRootColor, 2, 0));
  ASSERT_EQ(tree.scene.arrows.size(), 4u);
  for (const SceneArrow& a : tree.scene.arrows) {
    EXPECT_EQ(a.dst, a.src + 4);
    EXPECT_EQ(a.bytes, 5'000'000);
    EXPECT_TRUE(COLOR_AT(image, a.from.x + (a.to.x - a.from.x) * 0.2f, a.from.y + (a.to.y - a.from.y) * 0.2f,
                         chunk_color(-1), 3, 0));
  }
  // Sequential at 12.5 s: its third message, 0 -> 3.
  const auto& seq = panel.last_layout().columns[0];
  ASSERT_EQ(seq.scene.arrows.size(), 1u);
  EXPECT_EQ(seq.scene.arrows[0].src, 0);
  EXPECT_EQ(seq.scene.arrows[0].dst, 3);
}

}  // namespace
}  // namespace distlab::viz
