// The Plan panel rendered headless, on the record of plan_samples.hpp: each
// measured layout's point where its predicted and measured times put it on
// the plot's one scale (x = left + (ms - lo) / (hi - lo) * side, the same
// for y upwards, worked out here), the diagonal y = x, the failed layout
// not plotted; a click on a point selects its layout; the selected
// layout's bars stacked category by category in their colours, bottom up,
// at the heights their bytes give on one scale for every layout; the job's
// predicted and metered bytes as bars in proportion. Then the App and the
// command line with --plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "app.hpp"
#include "plan_panel.hpp"
#include "plan_samples.hpp"
#include "render_helpers.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

class PlanRender : public ::testing::Test {
 protected:
  PlanRender() : renderer_(1500, 860) {
    setup_imgui(1.0f);
    panel_.set_plan(read_plan_text(kPlanJson));
  }
  // A press and release of the left button at `at`, a frame each, then the mouse away.
  void click_at(ImVec2 at) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = at;
    for (bool down : {false, true, false}) {
      io.MouseDown[0] = down;
      render_in_window(
          renderer_, [this] { panel_.draw(); }, 1);
    }
    io.MousePos = ImVec2(-1, -1);
  }

  Image render() {
    return render_in_window(renderer_, [this] { panel_.draw(); });
  }
  // The plot's mapping, written out: ms lo..hi across and up, one scale.
  float x_of(double ms) const {
    const PlanFrameLayout& l = panel_.last_layout();
    return l.plot_left + static_cast<float>((ms - l.lo_ms) / (l.hi_ms - l.lo_ms)) * (l.plot_right - l.plot_left);
  }
  float y_of(double ms) const {
    const PlanFrameLayout& l = panel_.last_layout();
    return l.plot_bottom - static_cast<float>((ms - l.lo_ms) / (l.hi_ms - l.lo_ms)) * (l.plot_bottom - l.plot_top);
  }
  int index_of(int place) const {
    const auto& layouts = panel_.plan().layouts;
    for (size_t i = 0; i < layouts.size(); ++i)
      if (layouts[i].place == place) return static_cast<int>(i);
    return -1;
  }

  HeadlessRenderer renderer_;
  PlanPanel panel_{Options{}};
};

// (predicted, measured) ms of the layouts that ran, as plan_samples.hpp's table has them.
const std::vector<std::array<double, 3>> kRan = {{1, 50, 100}, {2, 60, 80}, {9, 90, 90}, {12, 100, 80}};

TEST_F(PlanRender, EachLayoutThatRanIsAPointOnOneScaleWithTheDiagonal) {
  const Image image = render();
  const PlanFrameLayout& l = panel_.last_layout();
  ASSERT_TRUE(l.drawn);
  ASSERT_TRUE(l.scatter_drawn);
  // A square from 0 ms, holding every time of the table.
  EXPECT_FLOAT_EQ(l.plot_right - l.plot_left, l.plot_bottom - l.plot_top);
  ASSERT_GT(l.plot_right - l.plot_left, 300.0f);
  EXPECT_EQ(l.lo_ms, 0.0);
  EXPECT_GE(l.hi_ms, 100.0);
  EXPECT_LE(l.hi_ms, 200.0);
  // The failed layout (place 3) and the one not run (place 4) have no point.
  ASSERT_EQ(l.points.size(), kRan.size());
  for (const auto& [place, predicted, measured] : kRan) {
    const std::string what = "place " + std::to_string(static_cast<int>(place));
    const float x = x_of(predicted), y = y_of(measured);
    bool listed = false;
    for (const PlanPoint& p : l.points)
      if (p.layout == index_of(static_cast<int>(place))) {
        listed = true;
        EXPECT_NEAR(p.at.x, x, 0.01) << what;
        EXPECT_NEAR(p.at.y, y, 0.01) << what;
      }
    EXPECT_TRUE(listed) << what;
    EXPECT_TRUE(COLOR_AT(image, x, y, kPlanPointColor, 3, 0)) << what;
  }
  // Place 1 ran slower than predicted: above the diagonal; place 12 faster: below.
  EXPECT_LT(y_of(100), y_of(50));
  EXPECT_GT(y_of(80), y_of(100));
  // The diagonal y = x, away from the points (place 9's 90 ms is on it).
  for (const double ms : {0.12 * l.hi_ms, 0.25 * l.hi_ms, 0.45 * l.hi_ms, 0.75 * l.hi_ms, 0.9 * l.hi_ms})
    EXPECT_TRUE(COLOR_AT(image, x_of(ms), y_of(ms), kPlanDiagonalColor, 12, 1)) << ms << " ms";
  // Off it, between grid lines and points: the canvas.
  EXPECT_TRUE(COLOR_AT(image, x_of(0.45 * l.hi_ms), y_of(0.15 * l.hi_ms), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(0.15 * l.hi_ms), y_of(0.55 * l.hi_ms), kCanvasColor, 2, 0));

  // The header's lines: what was planned, and the scores computed from the layouts.
  EXPECT_EQ(l.header,
            "the cpu preset on 4 ranks (20 x 35 tokens a step); profile vm (2 cores), 2026-11-30 (2 cores, cpu); 412 "
            "layouts accepted, 96 refused; 6 layouts, 5 measured (1 failed)");
  EXPECT_EQ(l.scores.rfind("4 layouts ran: step time error mean 25.0%, worst 50.0%; Spearman -0.63; regret 25.0%", 0),
            0u)
      << l.scores;
  EXPECT_NE(l.scores.find("job memory error mean 13.3%, worst 20.0%"), std::string::npos) << l.scores;
}

TEST_F(PlanRender, ClickingAPointSelectsItsLayout) {
  render();
  EXPECT_EQ(panel_.selected(), index_of(1));  // the first place, to start with
  click_at(ImVec2(x_of(60) + 1, y_of(80) - 1));  // on place 2's point
  EXPECT_EQ(panel_.selected(), index_of(2));
  const Image image = render();
  // The selection's ring around the point.
  const PlanFrameLayout& l = panel_.last_layout();
  EXPECT_EQ(l.selected, index_of(2));
  EXPECT_TRUE(COLOR_AT(image, x_of(60) + l.point_radius + 3.0f, y_of(80), kCursorColor, 40, 1));
  // A click away from every point selects nothing new.
  click_at(ImVec2(x_of(0.15 * l.hi_ms), y_of(0.55 * l.hi_ms)));
  EXPECT_EQ(panel_.selected(), index_of(2));
}

TEST_F(PlanRender, ClickingARowOfTheTableSelectsItsLayout) {
  render();
  const PlanFrameLayout& l = panel_.last_layout();
  ASSERT_EQ(l.rows.size(), 6u);  // every layout, the failed and the one not run too
  const auto row =
      std::find_if(l.rows.begin(), l.rows.end(), [&](const PlanRow& r) { return r.layout == index_of(4); });
  ASSERT_NE(row, l.rows.end());
  click_at(ImVec2((row->min.x + row->max.x) * 0.5f, (row->min.y + row->max.y) * 0.5f));
  EXPECT_EQ(panel_.selected(), index_of(4));  // not run: its predicted bars, no job bars
  render();
  EXPECT_EQ(panel_.last_layout().bars.size(), 1u);
  EXPECT_FALSE(panel_.last_layout().job_drawn);
}

// Place 2: pipeline ranks 0 and 1, every category but the loss gradient on
// rank 0 and all but the shard and the optimizer state on rank 1, each
// segment's middle at (bytes below + half its own) of 136 MB, the largest
// bar of any layout.
TEST_F(PlanRender, TheSelectedLayoutsBarsAreStackedInOrder) {
  panel_.select(index_of(2));
  const Image image = render();
  const PlanFrameLayout& l = panel_.last_layout();
  ASSERT_EQ(l.full_bytes, kPlanFullBytes);
  ASSERT_EQ(l.bars.size(), 2u);
  ASSERT_GT(l.chart_bottom - l.chart_top, 300.0f);
  const std::array<std::array<int64_t, kPlanCategoryCount>, 2> bytes = {{
      {20'000'000, 20'000'000, 8'000'000, 8'000'000, 4'000'000, 12'000'000, 0, 5'000'000},
      {22'000'000, 22'000'000, 0, 0, 22'000'000, 10'000'000, 2'000'000, 5'000'000},
  }};
  const auto y_at = [&](double b) {
    return l.chart_bottom -
           static_cast<float>(b / static_cast<double>(kPlanFullBytes)) * (l.chart_bottom - l.chart_top);
  };
  for (size_t r = 0; r < 2; ++r) {
    const PlanBar& bar = l.bars[r];
    EXPECT_EQ(bar.pipeline_rank, static_cast<int>(r));
    ASSERT_GT(bar.x1 - bar.x0, 20.0f);
    const float x = (bar.x0 + bar.x1) * 0.5f;
    double below = 0;
    float last_y = l.chart_bottom + 1;
    for (int c = 0; c < kPlanCategoryCount; ++c) {
      const double b = static_cast<double>(bytes[r][static_cast<size_t>(c)]);
      if (b == 0) continue;
      const float y = y_at(below + b / 2);
      const std::string what = "rank " + std::to_string(r) + " " + plan_category_label(c);
      EXPECT_TRUE(COLOR_AT(image, x, y, plan_category_color(c), 3, 0)) << what;
      EXPECT_LT(y, last_y) << what;  // above the one before
      last_y = y;
      below += b;
    }
    // Nothing of the bar above its total (a little over it, under its label).
    EXPECT_FALSE(COLOR_AT(image, x, y_at(below) - 3, plan_category_color(kPlanCategoryCount - 1), 3, 0));
    EXPECT_TRUE(COLOR_AT(image, x, y_at(below) + 2, plan_category_color(kPlanCategoryCount - 1), 3, 0));
  }
  // The categories' colours are eight different ones.
  for (int a = 0; a < kPlanCategoryCount; ++a)
    for (int b = a + 1; b < kPlanCategoryCount; ++b)
      EXPECT_GT(color_distance(plan_category_color(a), plan_category_color(b)), 20) << a << " " << b;

  // The job: 300 MB predicted and 300 MB metered, bars of one length (the
  // length of a bar measured in pixels along its middle row).
  ASSERT_TRUE(l.job_drawn);
  EXPECT_EQ(l.full_job_bytes, 300'000'000);
  const auto length = [](const Image& shown, const PlanFrameLayout& f, float y, Color c) {
    int x = static_cast<int>(f.job_left) + 1;
    while (x < shown.width && color_distance(shown.at(x, static_cast<int>(y)), c) <= 3) ++x;
    return static_cast<float>(x) - f.job_left;
  };
  EXPECT_NEAR(length(image, l, l.job_predicted_y, kPlanJobPredictedColor), l.job_right - l.job_left, 2.0f);
  EXPECT_NEAR(length(image, l, l.job_metered_y, kPlanJobMeteredColor), l.job_right - l.job_left, 2.0f);
  // Place 9: 200 MB predicted against 250 MB metered, 4 pipeline ranks.
  panel_.select(index_of(9));
  const Image nine = render();
  const PlanFrameLayout& n = panel_.last_layout();
  EXPECT_EQ(n.bars.size(), 4u);
  EXPECT_EQ(n.full_job_bytes, 250'000'000);
  EXPECT_NEAR(length(nine, n, n.job_predicted_y, kPlanJobPredictedColor), (n.job_right - n.job_left) * 0.8f, 2.0f);
  EXPECT_NEAR(length(nine, n, n.job_metered_y, kPlanJobMeteredColor), n.job_right - n.job_left, 2.0f);
}

TEST_F(PlanRender, WithoutAPlanTheNoteSaysHowToMakeOne) {
  PlanPanel empty{Options{}};
  render_in_window(renderer_, [&] { empty.draw(); });
  EXPECT_FALSE(empty.last_layout().drawn);
  EXPECT_FALSE(empty.opened());
}

// --plan FILE (alone: the Plan tab), drawn by the App, and the same from
// the command line with a screenshot; a bad record stops both with its
// one-line message.
TEST(PlanApp, PlanOpensThePlanTab) {
  const std::string path = temp_path("plan_app.json");
  write_text(path, kPlanJson);
  std::vector<const char*> argv = {"distlab-viz", "--plan", path.c_str()};
  Options o;
  ASSERT_FALSE(parse_options(static_cast<int>(argv.size()), argv.data(), o).has_value());
  EXPECT_EQ(o.panel, "plan");
  EXPECT_EQ(o.plan_file, path);
  App app(o);
  std::string said;
  for (const std::string& m : app.messages()) said += m + "\n";
  EXPECT_NE(said.find("opened " + path + ": a plan of 6 layouts, 5 measured (1 failed)"), std::string::npos) << said;
  HeadlessRenderer renderer(1280, 720);
  setup_imgui(1.0f);
  for (int i = 0; i < 3; ++i) renderer.frame([&] { app.frame(); });
  const Image image = renderer.read_pixels();
  const PlanFrameLayout& l = app.plan_panel().last_layout();
  ASSERT_TRUE(l.drawn);
  ASSERT_EQ(l.points.size(), 4u);
  EXPECT_TRUE(COLOR_AT(image, l.points[0].at.x, l.points[0].at.y, kPlanPointColor, 3, 0));

  // With --panel trace it stays on the trace panel; a bad record is refused.
  std::vector<const char*> other = {"distlab-viz", "--panel", "trace", "--plan", path.c_str()};
  Options t;
  ASSERT_FALSE(parse_options(static_cast<int>(other.size()), other.data(), t).has_value());
  EXPECT_EQ(t.panel, "trace");
  const std::string bad = temp_path("plan_bad.json");
  write_text(bad, "{\"format\": \"distlab-plan\", \"version\": 7}");
  o.plan_file = bad;
  EXPECT_THROW(App{o}, PlanFormatError);

  std::string help;
  ASSERT_EQ(run({VIZ_BINARY, "--help"}, {}, &help), 0) << help;
  EXPECT_NE(help.find(",plan,"), std::string::npos) << help;  // among --panel's choices
  EXPECT_NE(help.find("--plan"), std::string::npos) << help;
}

TEST(PlanApp, TheCommandLineDrawsItHeadlessAndRefusesBadRecords) {
  const std::string path = temp_path("plan_cli.json");
  write_text(path, kPlanJson);
  const std::string png = temp_path("plan_cli.png");
  std::string out;
  ASSERT_EQ(run({VIZ_BINARY, "--plan", path, "--screenshot", png, "--width", "1280", "--height", "720"},
                {"DISPLAY=", "WAYLAND_DISPLAY="}, &out),
            0)
      << out;
  EXPECT_EQ(out, "distlab-viz: opened " + path + ": a plan of 6 layouts, 5 measured (1 failed)\n" +
                     "distlab-viz: wrote " + png + " (1280x720)\n");
  // The same pixels as the App draws in-process.
  Options o;
  o.panel = "plan";
  o.plan_file = path;
  App app(o);
  HeadlessRenderer renderer(1280, 720);
  setup_imgui(1.0f);
  for (int i = 0; i < 3; ++i) renderer.frame([&] { app.frame(); });
  const Image here = renderer.read_pixels();
  const Image from_cli = read_png(png);
  size_t different = 0;
  for (int y = 0; y < 720; ++y)
    for (int x = 0; x < 1280; ++x) different += here.at(x, y) != from_cli.at(x, y);
  EXPECT_EQ(different, 0u);

  const std::string cut = temp_path("plan_cli_cut.json");
  const std::string cut_text = kPlanJson.substr(0, kPlanJson.size() / 3);
  write_text(cut, cut_text);
  EXPECT_EQ(run({VIZ_BINARY, "--plan", cut, "--screenshot", png}, {"DISPLAY=", "WAYLAND_DISPLAY="}, &out), 1);
  EXPECT_EQ(out, "distlab-viz: plan " + cut + ": cut short: the JSON ends at byte " +
                     std::to_string(cut_text.find_last_not_of(" \n") + 1) + " before the plan does\n");
}

}  // namespace
}  // namespace distlab::viz
