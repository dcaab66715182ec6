// The Pipeline panel's playground: every m from 1 to 32 re-simulated for the
// setup. The series against the closed forms (the bubble (p-1)/(m+p-1) of
// GPipe and 1F1B, their activation peaks m and min(m, p), every schedule's
// bubble where the papers' formula is exact), each point's peak against
// the boxes of a direct simulation, and the plots rendered headless with each
// schedule's points and the current m where the scales put them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "app.hpp"
#include "pipeline_panel.hpp"
#include "pipeline_plots.hpp"
#include "render_helpers.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using pipeline::ActionType;
using pipeline::ScheduleKind;
using testing_util::render_in_window;

PipelineSetup equal_costs(int p) {
  PipelineSetup s;
  s.ranks = p;
  s.chunks = 2;
  s.costs = {1.0, 1.0, 0.5, 0.0};  // F = B; W matters only to split backwards
  return s;
}

// The busiest rank's activations, from the boxes alone: +1/v at each F's
// start, -1/v at the end of each B or W (the backward that releases the
// stage's input), releases first at equal times.
double rank_peak_from_boxes(const PipelineRun& run) {
  const double v = run.schedule.stages_per_rank;
  double peak = 0.0;
  for (const auto& row : run.boxes) {
    std::vector<std::pair<double, int>> changes;
    for (const ActionBox& b : row) {
      if (b.type == ActionType::kForward) changes.push_back({b.begin_s, +1});
      if (b.type == ActionType::kBackward || b.type == ActionType::kBackwardWeight) changes.push_back({b.end_s, -1});
    }
    std::sort(changes.begin(), changes.end());
    int held = 0;
    for (const auto& [time, delta] : changes) {
      held += delta;
      peak = std::max(peak, held / v);
    }
  }
  return peak;
}

TEST(PipelineSweep, GPipeAndOneFOneBFollowTheClosedForms) {
  for (int p = 1; p <= 8; ++p) {
    const std::vector<SweepSeries> series = sweep_microbatches(equal_costs(p), {ScheduleKind::kGPipe, ScheduleKind::k1F1B});
    ASSERT_EQ(series.size(), 2u);
    EXPECT_EQ(series[0].kind, ScheduleKind::kGPipe);
    EXPECT_EQ(series[1].kind, ScheduleKind::k1F1B);
    for (const SweepSeries& s : series) {
      ASSERT_EQ(s.points.size(), 32u) << "p=" << p;  // both take every m
      for (int m = 1; m <= 32; ++m) {
        const SweepPoint* point = s.at(m);
        ASSERT_NE(point, nullptr) << "p=" << p << " m=" << m;
        // The pipe fills and drains once: p - 1 idle slots of m + p - 1 per rank.
        const double law = double(p - 1) / double(m + p - 1);
        EXPECT_NEAR(point->bubble, law, 1e-12) << pipeline::kind_name(s.kind) << " p=" << p << " m=" << m;
        ASSERT_EQ(point->peak_activations.size(), static_cast<size_t>(p));
        // GPipe: every forward before any backward, all m held; 1F1B: a
        // backward after the first p forwards on stage 0.
        const int want = s.kind == ScheduleKind::kGPipe ? m : std::min(m, p);
        EXPECT_EQ(point->peak_activations[0], want) << pipeline::kind_name(s.kind) << " p=" << p << " m=" << m;
        EXPECT_DOUBLE_EQ(point->rank_peak, want) << pipeline::kind_name(s.kind) << " p=" << p << " m=" << m;
      }
    }
  }
}

// The papers' bubble at F = I = W (B = 2F) with free messages, where their
// formula is exact (pipeline/closed_form.hpp); nullopt elsewhere. Every rank
// computes v m (F + B) = 3vm forwards' time, and the step adds the most
// idle rank's idle to it, in forwards: (p-1)(F+B) = 3(p-1) for GPipe, 1F1B
// and Interleaved 1F1B (m a multiple of p); (p-1)(F+B-2W) = p-1 for ZB-H1
// and interleaved zero bubble (m >= p); (p-1)F = p-1 for ZBV (m >= 2p-1);
// (p-1)(F&B+B-3W) = 2(p-1) for DualPipeV, its F&B = F + B unoverlapped.
std::optional<double> papers_bubble(ScheduleKind kind, int p, int m, int v) {
  double idle = 0;
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B: idle = 3.0 * (p - 1); break;
    case ScheduleKind::kInterleaved1F1B:
      if (m % p != 0) return std::nullopt;
      idle = 3.0 * (p - 1);
      break;
    case ScheduleKind::kZeroBubbleH1:
    case ScheduleKind::kInterleavedZeroBubble:
      if (m < p) return std::nullopt;
      idle = p - 1;
      break;
    case ScheduleKind::kZeroBubbleV:
      if (m < 2 * p - 1) return std::nullopt;
      idle = p - 1;
      break;
    case ScheduleKind::kDualPipeV: idle = 2.0 * (p - 1); break;
    default: return std::nullopt;  // LoopedBFS: no formula
  }
  return idle / (idle + 3.0 * v * m);
}

// Each point's bubble is the papers' wherever their formula is exact, for
// every kind that has one, p = 1..5 and v = 2, 3 for the looped kinds.
TEST(PipelineSweep, EveryPointIsTheClosedFormWhereItIsExact) {
  std::map<ScheduleKind, int> compared;
  for (int p = 1; p <= 5; ++p)
    for (int chunks : {2, 3}) {
      PipelineSetup setup = equal_costs(p);
      setup.chunks = chunks;
      setup.costs = {1.0, 2.0, 1.0, 0.0};  // F = I = W
      const std::vector<ScheduleKind> kinds = pipeline::all_kinds();
      const std::vector<SweepSeries> series = sweep_microbatches(setup, kinds, 1, 16);
      ASSERT_EQ(series.size(), kinds.size());
      for (const SweepSeries& s : series)
        for (const SweepPoint& point : s.points) {
          const int v = stages_per_rank(s.kind, chunks);
          const std::optional<double> want = papers_bubble(s.kind, p, point.microbatches, v);
          if (!want) continue;
          EXPECT_NEAR(point.bubble, *want, 1e-9)
              << pipeline::kind_name(s.kind) << " p=" << p << " m=" << point.microbatches << " v=" << v;
          ++compared[s.kind];
        }
    }
  for (ScheduleKind kind : pipeline::all_kinds())
    if (kind != ScheduleKind::kLoopedBFS) EXPECT_GT(compared[kind], 10) << pipeline::kind_name(kind);
}

// Each point's busiest-rank peak is the one counted from the boxes of the
// panel's simulate_run of the same setup with that m, for every kind the
// library has (a kind added later is covered too), with unequal costs and
// a message latency.
TEST(PipelineSweep, EveryPointsRankPeakIsCountedFromItsBoxes) {
  PipelineSetup setup;
  setup.ranks = 3;
  setup.chunks = 2;
  setup.costs = {1.0, 2.5, 1.0, 0.1};
  const std::vector<ScheduleKind> kinds = pipeline::all_kinds();
  const std::vector<SweepSeries> series = sweep_microbatches(setup, kinds, 1, 12);
  ASSERT_EQ(series.size(), kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    EXPECT_EQ(series[k].kind, kinds[k]);
    for (const SweepPoint& point : series[k].points) {
      PipelineSetup s = setup;
      s.kind = kinds[k];
      s.microbatches = point.microbatches;
      const PipelineRun run = simulate_run(s);
      const std::string what = run.title;
      EXPECT_EQ(point.peak_activations, run.peak_activations) << what;
      EXPECT_NEAR(point.rank_peak, rank_peak_from_boxes(run), 1e-12) << what;
      EXPECT_NEAR(rank_peak(run), rank_peak_from_boxes(run), 1e-12) << what;
      if (run.schedule.stages_per_rank == 1) EXPECT_DOUBLE_EQ(point.rank_peak, run.peak()) << what;
    }
  }
  // With v = 2 a rank's two stages count half a microbatch each: Interleaved
  // 1F1B holds more than 1F1B's p on its busiest rank, and not twice as much.
  const SweepPoint* interleaved = series[2].at(12);
  ASSERT_EQ(kinds[2], ScheduleKind::kInterleaved1F1B);
  ASSERT_NE(interleaved, nullptr);
  EXPECT_GT(interleaved->rank_peak, setup.ranks);
  EXPECT_LT(interleaved->rank_peak, 2.0 * setup.ranks);
}

// An m a schedule refuses (make_schedule throws ScheduleError) is absent
// from its series, not an error: m = 0 is refused by every schedule, and
// whatever else the library refuses for Interleaved 1F1B is absent too.
TEST(PipelineSweep, RefusedMicrobatchCountsAreLeftOut) {
  for (int p : {2, 3, 4}) {
    for (int v : {2, 3}) {
      PipelineSetup setup = equal_costs(p);
      setup.chunks = v;
      const std::vector<SweepSeries> series =
          sweep_microbatches(setup, {ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B}, -1, 16);
      ASSERT_EQ(series.size(), 2u);
      for (const SweepSeries& s : series) {
        std::set<int> accepted, got;
        for (int m = -1; m <= 16; ++m) {
          try {
            pipeline::make_schedule(s.kind, p, m, stages_per_rank(s.kind, v));
            accepted.insert(m);
          } catch (const pipeline::ScheduleError&) {
          }
        }
        for (const SweepPoint& point : s.points) got.insert(point.microbatches);
        EXPECT_EQ(got, accepted) << pipeline::kind_name(s.kind) << " p=" << p << " v=" << v;
        EXPECT_EQ(s.at(0), nullptr);
        EXPECT_EQ(s.at(-1), nullptr);
        EXPECT_NE(s.at(1), nullptr);
        ASSERT_FALSE(s.points.empty());
        EXPECT_EQ(s.points.front().microbatches, *accepted.begin());
      }
    }
  }
}

TEST(PipelineSweep, CacheRecomputesOnlyWhenTheSetupChanges) {
  SweepCache cache;
  PipelineSetup setup = equal_costs(4);
  std::vector<ScheduleKind> kinds = {ScheduleKind::kGPipe, ScheduleKind::k1F1B};
  const double first = cache.get(setup, kinds)[0].at(8)->bubble;
  EXPECT_EQ(cache.computed(), 1);
  EXPECT_NEAR(first, 3.0 / 11.0, 1e-12);
  setup.microbatches = 20;  // m only moves the marker
  cache.get(setup, kinds);
  EXPECT_EQ(cache.computed(), 1);
  setup.chunks = 3;  // v means nothing to GPipe and 1F1B
  cache.get(setup, kinds);
  EXPECT_EQ(cache.computed(), 1);
  setup.ranks = 2;
  EXPECT_NEAR(cache.get(setup, kinds)[0].at(8)->bubble, 1.0 / 9.0, 1e-12);
  EXPECT_EQ(cache.computed(), 2);
  kinds.push_back(ScheduleKind::kInterleaved1F1B);
  EXPECT_EQ(cache.get(setup, kinds).size(), 3u);
  EXPECT_EQ(cache.computed(), 3);
  setup.chunks = 2;  // now it does
  cache.get(setup, kinds);
  EXPECT_EQ(cache.computed(), 4);
  setup.costs.send = 0.5;
  const std::vector<SweepSeries>& sent = cache.get(setup, kinds);
  EXPECT_EQ(cache.computed(), 5);
  EXPECT_GT(sent[0].at(8)->bubble, 1.0 / 9.0);  // waiting on messages idles the ranks more
  // What the cache holds is what a fresh sweep gives.
  const std::vector<SweepSeries> fresh = sweep_microbatches(setup, kinds);
  for (size_t k = 0; k < fresh.size(); ++k)
    for (size_t i = 0; i < fresh[k].points.size(); ++i)
      EXPECT_DOUBLE_EQ(sent[k].points[i].bubble, fresh[k].points[i].bubble);
}

TEST(PipelineSweep, EveryKindHasItsOwnColour) {
  std::set<Color> colors;
  for (ScheduleKind kind : pipeline::all_kinds()) colors.insert(schedule_color(kind));
  EXPECT_EQ(colors.size(), pipeline::all_kinds().size());
  EXPECT_EQ(colors.count(kCursorColor), 0u);
  EXPECT_EQ(colors.count(kCanvasColor), 0u);
}

class PipelinePlotRender : public ::testing::Test {
 protected:
  PipelinePlotRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

Options gpipe_and_1f1b(int m) {
  Options o;
  o.schedule = "gpipe,1f1b";
  o.pipeline_stages = 4;
  o.microbatches = m;
  o.cost_forward = 1.0;
  o.cost_backward = 2.0;
  o.cost_send = 0.0;
  return o;
}

// p = 4, m = 8, F = 1, B = 2: the points where the closed forms put them,
// in their schedule's colour, and the current m's line at m = 8.
TEST_F(PipelinePlotRender, PointsAndCurrentMWhereTheLawsPutThem) {
  PipelinePanel panel(gpipe_and_1f1b(8));
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  EXPECT_EQ(panel.sweep().computed(), 1);  // three frames, one sweep
  const PipelineFrameLayout& layout = panel.last_layout();
  ASSERT_EQ(layout.plots.size(), 2u);
  const SweepPlotLayout& bubble = layout.plots[0];
  const SweepPlotLayout& peak = layout.plots[1];
  EXPECT_EQ(bubble.quantity, SweepQuantity::kBubble);
  EXPECT_EQ(peak.quantity, SweepQuantity::kRankPeak);
  // Under the schedules' columns, side by side.
  ASSERT_FALSE(layout.columns.empty());
  const auto& column = layout.columns[0];
  EXPECT_GT(bubble.top, column.memory_row_tops.back() + column.memory_row_height);
  EXPECT_LT(bubble.right, peak.left);
  // Scales: GPipe holds 32 at m = 32, a multiple of 4; the largest bubble,
  // 3/4 at m = 1, rounds up to 80%.
  EXPECT_DOUBLE_EQ(peak.y_max, 32.0);
  EXPECT_DOUBLE_EQ(bubble.y_max, 0.8);
  EXPECT_GT(peak.x_of(9) - peak.x_of(8), 12.0f);  // room to tell m apart

  const Color gpipe = schedule_color(ScheduleKind::kGPipe), ofob = schedule_color(ScheduleKind::k1F1B);
  // Peaks: GPipe's m at m = 16 and 24; 1F1B's min(m, p) = 4 at m = 20.
  for (int m : {16, 24}) EXPECT_TRUE(COLOR_AT(image, peak.x_of(m), peak.y_of(m), gpipe, 2, 0)) << "GPipe m=" << m;
  EXPECT_TRUE(COLOR_AT(image, peak.x_of(20), peak.y_of(4), ofob, 2, 0));
  // Between two of GPipe's points, off its line: nothing.
  EXPECT_TRUE(COLOR_AT(image, peak.x_of(16.5), peak.y_of(20), kCanvasColor, 2, 0));
  // Bubbles: both schedules at (p-1)/(m+p-1); 1F1B, drawn later, on top.
  for (int m : {4, 12, 28}) {
    const double law = 3.0 / (m + 3.0);
    EXPECT_TRUE(COLOR_AT(image, bubble.x_of(m), bubble.y_of(law), ofob, 2, 0)) << "1F1B m=" << m;
  }
  // The current m: a yellow line at m = 8 well above the points there, and
  // none at m = 9.
  for (const SweepPlotLayout* plot : {&bubble, &peak}) {
    const float y = plot->y_of(plot->y_max * 0.9);
    EXPECT_TRUE(COLOR_AT(image, plot->x_of(8), y, kCursorColor, 2, 0));
    EXPECT_TRUE(COLOR_AT(image, plot->x_of(9), y, kCanvasColor, 2, 0));
  }
}

TEST_F(PipelinePlotRender, TheMarkerFollowsM) {
  PipelinePanel panel(gpipe_and_1f1b(20));
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const SweepPlotLayout& peak = panel.last_layout().plots.at(1);
  const float y = peak.y_of(30.0);  // above GPipe's 20 and 1F1B's 4
  EXPECT_TRUE(COLOR_AT(image, peak.x_of(20), y, kCursorColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, peak.x_of(8), y, kCanvasColor, 2, 0));
  // GPipe's point at m = 20 is drawn over the line.
  EXPECT_TRUE(COLOR_AT(image, peak.x_of(20), peak.y_of(20), schedule_color(ScheduleKind::kGPipe), 2, 0));
}

}  // namespace
}  // namespace distlab::viz
