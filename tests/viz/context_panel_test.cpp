// The Context parallel panel: ring attention's plan (make_ring_plan) on the
// attention matrix. Every block of the matrix is the plan's, the pairs per
// rank are the plan's own totals (uneven for contiguous, even for zigzag),
// the step control highlights exactly the plan's blocks of that step, and
// the headless render colours each block as the plan says and draws the
// two layouts differently.
#include <gtest/gtest.h>
#include <imgui.h>

#include <algorithm>

#include "app.hpp"
#include "context_panel.hpp"
#include "render_helpers.hpp"

namespace distlab::viz {
namespace {

using context_parallel::BlockWork;
using context_parallel::Cover;
using context_parallel::Layout;
using namespace testing_util;

TEST(RingView, EveryBlockOfTheMatrixIsThePlansAndPairsAreItsTotals) {
  for (Layout layout : {Layout::kContiguous, Layout::kZigzag}) {
    for (int c = 1; c <= 8; ++c) {
      for (bool causal : {true, false}) {
        const int64_t length = ring_length(c, 1000);
        const RingView view = make_ring_view(layout, c, length, causal);
        const context_parallel::RingPlan plan = context_parallel::make_ring_plan(layout, c, length, causal);
        ASSERT_EQ(view.chunks, layout == Layout::kZigzag ? 2 * c : c);
        for (int q = 0; q < view.chunks; ++q)
          for (int k = 0; k < view.chunks; ++k) {
            EXPECT_EQ(view.block(q, k).q_chunk, q);
            EXPECT_EQ(view.block(q, k).k_chunk, k);
          }
        ASSERT_EQ(view.rank_pairs.size(), static_cast<size_t>(c));
        for (int r = 0; r < c; ++r) {
          int64_t sum = 0;
          for (const BlockWork& b : plan.blocks)
            if (b.rank == r) sum += b.pairs;
          EXPECT_EQ(view.rank_pairs[r], sum) << context_parallel::to_string(layout) << " C=" << c << " rank " << r;
        }
      }
    }
  }
}

TEST(RingView, ContiguousIsUnevenZigzagIsEven) {
  // C = 4, S = 4096: contiguous rank r has r full blocks of 1024^2 and one
  // diagonal of 1024 * 1025 / 2; zigzag gives every rank the same.
  const RingView contiguous = make_ring_view(Layout::kContiguous, 4, 4096, true);
  const RingView zigzag = make_ring_view(Layout::kZigzag, 4, 4096, true);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(contiguous.rank_pairs[r], r * 1024 * 1024 + 1024 * 1025 / 2);
    EXPECT_EQ(zigzag.rank_pairs[r], zigzag.rank_pairs[0]);
  }
  EXPECT_NEAR(contiguous.imbalance(), 3670528.0 * 4 / (524800.0 + 1573376 + 2621952 + 3670528), 1e-9);
  EXPECT_DOUBLE_EQ(zigzag.imbalance(), 1.0);
  EXPECT_EQ(format_count(3670528), "3,670,528");
  EXPECT_EQ(format_count(999), "999");
}

TEST(ContextPanelTest, OptionsAndStepControls) {
  Options o;
  const char* argv[] = {"distlab-viz", "--panel", "context", "--cp-ranks", "3", "--cp-length", "4096", "--cp-step", "1"};
  ASSERT_FALSE(parse_options(9, argv, o).has_value());
  ContextPanel panel(o);
  EXPECT_EQ(panel.ranks(), 3);
  EXPECT_EQ(panel.length(), 4098) << "rounded up to a multiple of 2C";
  EXPECT_EQ(panel.step(), 1);
  panel.step_forward();
  panel.step_forward();
  EXPECT_EQ(panel.step(), 2) << "stays at the last step";
  for (int i = 0; i < 5; ++i) panel.step_back();
  EXPECT_EQ(panel.step(), -1) << "every step";
  panel.set_step(2);
  panel.set_ranks(2);
  EXPECT_EQ(panel.step(), 1) << "fewer ranks, fewer steps";
  EXPECT_EQ(panel.length(), 4096);
  panel.set_ranks(20);
  EXPECT_EQ(panel.ranks(), kMaxContextRanks);
}

class ContextRender : public ::testing::Test {
 protected:
  ContextRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

// What the plan says block b looks like with `step` highlighted, written
// out here rather than taken from the panel.
Color expected_fill(const BlockWork& b, int step) {
  if (b.cover == Cover::kSkipped) return kSkippedBlockColor;
  if (step >= 0 && b.step != step) return mix(chunk_color(b.rank), kCanvasColor, kOtherStepDim);
  return chunk_color(b.rank);
}

TEST_F(ContextRender, TheHighlightedBlocksAreExactlyThePlansBlocksOfThatStep) {
  Options o;
  o.cp_ranks = 4;
  ContextPanel panel(o);
  for (int step = -1; step < 4; ++step) {
    panel.set_step(step);
    const Image image = render_in_window(renderer_, [&] { panel.draw(); });
    const ContextFrameLayout& layout = panel.last_layout();
    ASSERT_EQ(layout.views.size(), 2u);
    for (size_t v = 0; v < 2; ++v) {
      const RingView& view = panel.views()[v];
      const std::string what = std::string(context_parallel::to_string(view.plan.layout)) + " step " +
                               std::to_string(step);
      std::vector<int> want;
      for (size_t i = 0; i < view.plan.blocks.size(); ++i)
        if (view.plan.blocks[i].step == step) want.push_back(static_cast<int>(i));
      std::vector<int> got = layout.views[v].highlighted;
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << what;
      // A step is one block per query chunk held and key chunk held: C of
      // them under contiguous, 4C under zigzag.
      EXPECT_EQ(got.size(), step < 0 ? 0u : static_cast<size_t>(view.chunks * view.chunks / view.plan.ranks)) << what;

      const RingMatrix& m = layout.views[v].matrix;
      ASSERT_EQ(m.chunks, view.chunks);
      for (int q = 0; q < m.chunks; ++q) {
        for (int k = 0; k < m.chunks; ++k) {
          const BlockWork& b = view.block(q, k);
          const ImVec2 lo = m.cell_min(q, k);
          const float w = m.cell - 1.0f;
          const std::string at = what + " q" + std::to_string(q) + " k" + std::to_string(k);
          // Inside the block, clear of the outline: the lower-left part for
          // a diagonal block (keys up to the query), its grey upper right.
          EXPECT_TRUE(COLOR_AT(image, lo.x + 0.2f * w, lo.y + 0.75f * w, expected_fill(b, step), 2, 0)) << at;
          if (b.cover == Cover::kDiagonal)
            EXPECT_TRUE(COLOR_AT(image, lo.x + 0.8f * w, lo.y + 0.25f * w, kSkippedBlockColor, 2, 0)) << at;
          const bool outlined = COLOR_AT(image, lo.x + 1.0f, lo.y + 0.5f * w, kStepOutlineColor, 3, 1);
          EXPECT_EQ(outlined, b.step == step) << at;
        }
      }
    }
  }
}

TEST_F(ContextRender, ContiguousAndZigzagDrawDifferently) {
  Options o;
  o.cp_ranks = 4;
  o.cp_length = 4096;
  ContextPanel panel(o);
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const auto& contiguous = panel.last_layout().views.at(0);
  const auto& zigzag = panel.last_layout().views.at(1);
  ASSERT_EQ(contiguous.matrix.chunks, 4);
  ASSERT_EQ(zigzag.matrix.chunks, 8);
  // Both cover the same square of the same size: the same S x S matrix.
  EXPECT_NEAR(contiguous.matrix.cell * 4, zigzag.matrix.cell * 8, 8.0f);
  // The last query rows: rank 3's under contiguous, rank 0's (chunk 7 is
  // rank 0's second) under zigzag.
  auto inside = [](const RingMatrix& m, int q, int k) {
    const ImVec2 lo = m.cell_min(q, k);
    return ImVec2(lo.x + 0.3f * m.cell, lo.y + 0.6f * m.cell);
  };
  ImVec2 p = inside(contiguous.matrix, 3, 0);
  EXPECT_TRUE(COLOR_AT(image, p.x, p.y, chunk_color(3), 2, 0));
  p = inside(zigzag.matrix, 7, 0);
  EXPECT_TRUE(COLOR_AT(image, p.x, p.y, chunk_color(0), 2, 0));

  // Sampled at the same places of the two squares, most samples differ.
  int differ = 0, samples = 0;
  const float side = contiguous.matrix.cell * 4;
  for (float fy = 0.02f; fy < 1.0f; fy += 0.05f)
    for (float fx = 0.02f; fx < 1.0f; fx += 0.05f) {
      const Color a = image.at(static_cast<int>(contiguous.matrix.min.x + fx * side),
                               static_cast<int>(contiguous.matrix.min.y + fy * side));
      const Color b = image.at(static_cast<int>(zigzag.matrix.min.x + fx * side),
                               static_cast<int>(zigzag.matrix.min.y + fy * side));
      differ += color_distance(a, b) > 6;
      ++samples;
    }
  EXPECT_GT(differ, samples / 4) << differ << " of " << samples;

  // The bars: growing with the rank under contiguous, all alike under
  // zigzag, each in its rank's colour, on one scale.
  for (int r = 0; r < 4; ++r) {
    const float cw = contiguous.bar_max[r].x - contiguous.bar_min[r].x;
    const float zw = zigzag.bar_max[r].x - zigzag.bar_min[r].x;
    if (r > 0) EXPECT_GT(cw, contiguous.bar_max[r - 1].x - contiguous.bar_min[r - 1].x);
    EXPECT_NEAR(zw, zigzag.bar_max[0].x - zigzag.bar_min[0].x, 0.5f);
    const double want_ratio = static_cast<double>(panel.views()[0].rank_pairs[r]) / panel.views()[1].rank_pairs[r];
    EXPECT_NEAR(cw / zw, want_ratio, 0.02) << "rank " << r;
    const float y = (contiguous.bar_min[r].y + contiguous.bar_max[r].y) * 0.5f;
    EXPECT_TRUE(COLOR_AT(image, contiguous.bar_min[r].x + 2, y, chunk_color(r), 2, 0)) << "rank " << r;
  }
}

TEST_F(ContextRender, PanelContextOpensTheTab) {
  Options o;
  o.panel = "context";
  o.cp_ranks = 2;
  App app(o);
  for (int i = 0; i < 3; ++i) renderer_.frame([&] { app.frame(); });
  EXPECT_EQ(app.context_panel().last_layout().views.size(), 2u);
}

}  // namespace
}  // namespace distlab::viz
