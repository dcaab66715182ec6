// All-to-all in the Collectives panel: the pairwise plan replayed on paper
// fills every rank's output with one block from every rank, step by step as
// the plan's transfers say; equal and uneven (all-to-all-v) blocks are laid
// out as wide as their bytes; and the headless render colours each input
// block by its destination and each output block by its source once it has
// arrived.
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

CollectiveSetup all_to_all(int ranks, bool uneven, int64_t bytes = 1 << 20) {
  CollectiveSetup s;
  s.collective = Collective::kAllToAll;
  s.ranks = ranks;
  s.bytes = bytes;
  s.uneven = uneven;
  s.link = collectives::LinkParams{1e-5, 1e-9};
  return s;
}

TEST(AllToAllScene, EveryOutputBlockEndsHoldingItsSendersBlock) {
  for (bool uneven : {false, true}) {
    for (int p = 2; p <= 16; ++p) {
      const AlgorithmRun run = make_run(all_to_all(p, uneven), Algorithm::kPairwise);
      ASSERT_TRUE(run.holdings.empty());
      ASSERT_EQ(run.outputs.size(), run.plan.steps.size() + 1);
      const auto& end = run.outputs.back();
      for (int r = 0; r < p; ++r) {
        for (int s = 0; s < p; ++s) {
          // Rank s's input block for r, or nothing where s sends r nothing.
          const BlockOrigin want = run.plan.output_block(r, s).count > 0 ? BlockOrigin{s, r} : BlockOrigin{};
          EXPECT_EQ(end[r][s], want) << (uneven ? "uneven" : "even") << " p=" << p << " rank " << r << " block from "
                                     << s << ": holds rank " << end[r][s].rank << "'s block " << end[r][s].block;
        }
      }
    }
  }
}

TEST(AllToAllScene, PairwiseFillsOneBlockPerStepFromRankMinusK) {
  const int p = 6;
  const AlgorithmRun run = make_run(all_to_all(p, false), Algorithm::kPairwise);
  ASSERT_EQ(run.steps(), p - 1);
  for (int k = 0; k <= run.steps(); ++k) {
    // Before step k (0-based) rank r has its own block and those of ranks
    // r - 1 .. r - k: the plan's step j brings the block of rank r - (j + 1).
    for (int r = 0; r < p; ++r) {
      for (int s = 0; s < p; ++s) {
        const int distance = (r - s + p) % p;
        const bool arrived = distance <= k;
        EXPECT_EQ(run.outputs[k][r][s].rank, arrived ? s : -1) << "before step " << k << " rank " << r << " from " << s;
      }
    }
  }
}

TEST(AllToAllScene, TheSceneShowsTheStepsTransfersAsArrows) {
  const int p = 5;
  const AlgorithmRun run = make_run(all_to_all(p, false), Algorithm::kPairwise);
  for (int k = 0; k < run.steps(); ++k) {
    const double t = 0.5 * (run.step_begin_s[k] + run.step_begin_s[k + 1]);
    const SceneLayout s = layout_scene(run, t, ImVec2(0, 0), ImVec2(800, 600));
    ASSERT_EQ(s.arrows.size(), run.plan.steps[k].transfers.size());
    ASSERT_EQ(s.arrows.size(), static_cast<size_t>(p));
    for (const SceneArrow& a : s.arrows) {
      EXPECT_EQ(a.dst, (a.src + k + 1) % p);
      EXPECT_EQ(a.color, chunk_color(a.dst)) << "an arrow carries the input block coloured by its destination";
      EXPECT_EQ(a.bytes, (1 << 20) / p);
    }
  }
}

TEST(AllToAllScene, UnevenBlocksAreAsWideAsTheirBytesAndSomeAreEmpty) {
  const int p = 6;
  const int64_t bytes = 6000;
  const AlgorithmRun run = make_run(all_to_all(p, true, bytes), Algorithm::kPairwise);
  EXPECT_EQ(run.plan.counts, uneven_counts(p, bytes / p));
  int zeros = 0;
  for (int64_t c : run.plan.counts) zeros += c == 0;
  EXPECT_GT(zeros, 0);
  // A zero block is not sent: fewer transfers than the equal plan's p (p - 1).
  size_t transfers = 0;
  for (const auto& step : run.plan.steps) transfers += step.transfers.size();
  EXPECT_LT(transfers, static_cast<size_t>(p * (p - 1)));

  const SceneLayout s = layout_scene(run, 0.0, ImVec2(0, 0), ImVec2(900, 700));
  float widest = 0.0f;
  for (int r = 0; r < p; ++r) {
    for (int peer = 0; peer < p; ++peer) {
      for (bool output : {false, true}) {
        const auto [lo, hi] = s.block(run.plan, r, output, peer);
        const int64_t count = output ? run.plan.output_block(r, peer).count : run.plan.input_block(r, peer).count;
        EXPECT_NEAR(hi.x - lo.x, count * s.element_width, 1e-3) << r << " " << peer;
        EXPECT_GT(lo.y, s.nodes[r].y + s.node_radius) << "under the node";
        widest = std::max(widest, hi.x - s.block(run.plan, r, output, 0).first.x);
      }
      // The output row lies under the input row.
      EXPECT_GT(s.block(run.plan, r, true, peer).first.y, s.block(run.plan, r, false, peer).second.y);
    }
  }
  EXPECT_NEAR(widest, s.cell_size * p, 1e-3) << "the longest buffer spans world_size cells";
}

TEST(CollectivesPanelTest, OffersAllToAllWithPairwiseAndTheUnevenExample) {
  Options o;
  const char* argv[] = {"distlab-viz", "--collective", "all-to-all", "--uneven", "--ranks", "4"};
  ASSERT_FALSE(parse_options(6, argv, o).has_value());
  EXPECT_EQ(o.collective, "all_to_all");
  EXPECT_TRUE(o.uneven);
  CollectivesPanel panel(o);
  ASSERT_EQ(panel.runs().size(), 1u);
  EXPECT_EQ(panel.runs()[0].plan.collective, Collective::kAllToAll);
  EXPECT_EQ(panel.runs()[0].plan.algorithm, Algorithm::kPairwise);
  EXPECT_EQ(panel.runs()[0].plan.counts, uneven_counts(4, o.bytes / 4));
  o.algorithms = "ring";
  EXPECT_THROW(CollectivesPanel{o}, std::invalid_argument);
}

class AllToAllRender : public ::testing::Test {
 protected:
  AllToAllRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

// The centre of a block as drawn.
ImVec2 centre(const std::pair<ImVec2, ImVec2>& block) {
  return ImVec2((block.first.x + block.second.x) * 0.5f - 0.5f, (block.first.y + block.second.y) * 0.5f);
}

TEST_F(AllToAllRender, InputByDestinationOutputBySourceOnceArrived) {
  Options o;
  o.collective = "all_to_all";
  o.ranks = 4;
  o.step = 1;  // the second step, halfway: each rank has its own block and rank r - 1's
  CollectivesPanel panel(o);
  Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const AlgorithmRun& run = panel.runs()[0];
  const auto& col = panel.last_layout().columns.at(0);
  ASSERT_EQ(col.scene.step, 1);
  ASSERT_EQ(col.scene.arrows.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    for (int peer = 0; peer < 4; ++peer) {
      const ImVec2 in = centre(col.scene.block(run.plan, r, false, peer));
      EXPECT_TRUE(COLOR_AT(image, in.x, in.y, chunk_color(peer), 2, 0)) << "rank " << r << "'s block for " << peer;
      const bool arrived = (r - peer + 4) % 4 <= 1;
      const ImVec2 out = centre(col.scene.block(run.plan, r, true, peer));
      EXPECT_TRUE(COLOR_AT(image, out.x, out.y, arrived ? chunk_color(peer) : kEmptyCellColor, 2, 0))
          << "rank " << r << "'s block from " << peer;
    }
  }
  // At the end every output block has arrived, in its sender's colour.
  panel.set_time(panel.end_s());
  image = render_in_window(renderer_, [&] { panel.draw(); });
  const auto& end = panel.last_layout().columns.at(0);
  EXPECT_EQ(end.scene.step, run.steps());
  for (int r = 0; r < 4; ++r)
    for (int peer = 0; peer < 4; ++peer) {
      const ImVec2 out = centre(end.scene.block(run.plan, r, true, peer));
      EXPECT_TRUE(COLOR_AT(image, out.x, out.y, chunk_color(peer), 2, 0)) << "rank " << r << " from " << peer;
    }
}

}  // namespace
}  // namespace distlab::viz
