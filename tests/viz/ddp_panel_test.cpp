// The DDP panel: the step model against times worked out by hand (ring
// all-reduce 2(p-1) messages of n/p bytes), the strip's widths to scale,
// the plans read back from the JSON the reducer writes, and a headless
// render where every bucket's all-reduce box starts after its last
// gradient box ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include "app.hpp"
#include "ddp_panel.hpp"
#include "render_helpers.hpp"
#include "trace_loader.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using testing_util::render_in_window;

// Three parameters of 1000, 3000 and 2000 floats; 4 ranks.
Options small_model() {
  Options o;
  o.panel = "ddp";
  o.layers = "1000,3000,2000";
  o.ranks = 4;
  o.alpha = 1e-3;
  o.beta = 1e-6;
  o.bucket_mb = 10000.0 / ddp::kMiB;  // 10,000 bytes: each of p2 and p1 fills one
  o.first_bucket_mb = 4000.0 / ddp::kMiB;
  o.backward_gbps = 1e-6;  // 1,000 bytes per second: p2's gradient takes 8 s
  return o;
}

// A ring all-reduce of `bytes` on p ranks: 2(p-1) steps of alpha + (bytes/p) beta.
double ring_seconds(double bytes, int p, double alpha, double beta) { return 2.0 * (p - 1) * (alpha + bytes / p * beta); }

TEST(DdpScene, StepTimesAsWorkedByHand) {
  DdpPanel panel(small_model());
  // Reverse registration: p2 (8,000 B) fills the 4,000 B first bucket;
  // p1 (12,000 B) the second; p0 (4,000 B) opens a third.
  const ddp::BucketPlan& plan = panel.after();
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].params, std::vector<int>{2});
  EXPECT_EQ(plan.buckets[1].params, std::vector<int>{1});
  EXPECT_EQ(plan.buckets[2].params, std::vector<int>{0});

  const DdpStep& s = panel.rebuilt_step();
  // Backward 24 s (24,000 bytes at 1,000 B/s), forward half of it.
  EXPECT_NEAR(s.forward.end_s, 12.0, 1e-9);
  ASSERT_EQ(s.grads.size(), 3u);
  EXPECT_NEAR(s.grads[0].end_s, 20.0, 1e-9);  // p2: 8 s
  EXPECT_NEAR(s.grads[1].end_s, 32.0, 1e-9);  // p1: 12 s
  EXPECT_NEAR(s.grads[2].end_s, 36.0, 1e-9);  // p0: 4 s
  const double a0 = ring_seconds(8000, 4, 1e-3, 1e-6), a1 = ring_seconds(12000, 4, 1e-3, 1e-6),
               a2 = ring_seconds(4000, 4, 1e-3, 1e-6);
  ASSERT_EQ(s.all_reduces.size(), 3u);
  EXPECT_NEAR(s.all_reduces[0].begin_s, 20.0, 1e-9);
  EXPECT_NEAR(s.all_reduces[0].end_s - s.all_reduces[0].begin_s, a0, 1e-9);
  EXPECT_NEAR(s.all_reduces[1].begin_s, 32.0, 1e-9);
  EXPECT_NEAR(s.all_reduces[2].begin_s, 36.0, 1e-9);
  EXPECT_NEAR(s.all_reduces[2].end_s, 36.0 + a2, 1e-9);
  // Only the last bucket's all-reduce is after backward: hidden a0 + a1.
  EXPECT_NEAR(s.wait.begin_s, 36.0, 1e-9);
  EXPECT_NEAR(s.wait.end_s, 36.0 + a2, 1e-9);
  EXPECT_NEAR(s.overlap.fraction(), (a0 + a1) / (a0 + a1 + a2), 1e-5);
  EXPECT_NEAR(s.optimizer.begin_s, 36.0 + a2, 1e-9);
}

TEST(DdpScene, NoSyncRunsMicroStepsWithoutCommunicationFirst) {
  Options o = small_model();
  o.no_sync = 3;
  DdpPanel panel(o);
  const DdpStep& s = panel.rebuilt_step();
  ASSERT_EQ(s.local_forward.size(), 3u);
  ASSERT_EQ(s.local_backward.size(), 3u);
  EXPECT_NEAR(s.forward.begin_s, 3 * (12.0 + 24.0), 1e-9);
  EXPECT_EQ(s.all_reduces.size(), 3u);  // one synchronized step's worth, not four
  for (const auto& a : s.all_reduces) EXPECT_GE(a.begin_s, s.forward.end_s);
}

TEST(DdpScene, AStreamOfBucketsWaitsForTheOneBefore) {
  // Slow links: bucket 1 is ready long before bucket 0's all-reduce ends.
  Options o = small_model();
  o.beta = 1e-2;
  DdpPanel panel(o);
  const DdpStep& s = panel.rebuilt_step();
  EXPECT_NEAR(s.all_reduces[1].begin_s, s.all_reduces[0].end_s, 1e-9);
  EXPECT_NEAR(s.all_reduces[2].begin_s, s.all_reduces[1].end_s, 1e-9);
}

TEST(DdpScene, ReorderedModelRebuildsIntoTheReadyOrder) {
  const DdpModel m = preset_model("reordered");
  // head (params 0, 1) is registered first and ready first.
  EXPECT_EQ(m.params[0].name, "head.weight");
  EXPECT_EQ(m.ready_order[0], 1);
  EXPECT_EQ(m.ready_order[1], 0);
  Options o;
  o.model = "reordered";
  DdpPanel panel(o);
  EXPECT_EQ(panel.before().buckets.back().params.back(), 0);   // head.weight last before the rebuild
  EXPECT_EQ(panel.after().buckets.front().params.front(), 1);  // and its bias first after it
  // The rebuilt plan's step is no slower, and here faster.
  EXPECT_LT(panel.rebuilt_step().step_s, panel.first_step().step_s);
  EXPECT_THROW(preset_model("bogus"), std::invalid_argument);
  EXPECT_THROW(model_of_sizes("10,-3"), std::invalid_argument);
}

TEST(DdpScene, StripWidthsAreToScale) {
  DdpPanel panel(small_model());
  const std::vector<StripCell> cells = layout_strip(panel.after(), 1008.0f);
  ASSERT_EQ(cells.size(), 3u);
  // 24,000 bytes over 1008 - 2 gaps of 4 px = 1000 px: 1 px per 24 bytes.
  EXPECT_NEAR(cells[0].x1 - cells[0].x0, 8000 / 24.0, 0.01);
  EXPECT_NEAR(cells[1].x1 - cells[1].x0, 12000 / 24.0, 0.01);
  EXPECT_NEAR(cells[2].x1 - cells[2].x0, 4000 / 24.0, 0.01);
  EXPECT_NEAR(cells[1].x0 - cells[0].x1, kBucketGap, 0.01);
  EXPECT_NEAR(cells[2].x1, 1008.0f, 0.01);
}

// The reducer's trace events, written by the library's sink and read back:
// plans as BucketPlan::json(), one step's grad_ready, bucket and ddp_wait.
std::vector<trace::Event> reducer_events(const ddp::BucketPlan& before, const ddp::BucketPlan& after) {
  std::vector<trace::Event> events;
  auto add = [&](const std::string& name, const std::string& category, int64_t b, int64_t e,
                 std::vector<std::pair<std::string, std::string>> args) {
    trace::Event ev;
    ev.lane = "ddp";
    ev.name = name;
    ev.category = category;
    ev.begin_us = b;
    ev.end_us = e;
    ev.args = std::move(args);
    events.push_back(ev);
  };
  add("bucket plan", "bucket_plan", 0, 5, {{"rebuilt", "0"}, {"plan", before.json()}});
  add("bucket plan (rebuilt)", "bucket_plan", 10, 12, {{"rebuilt", "1"}, {"plan", after.json()}});
  // Step 1: gradients ready at 120, 150, 160; buckets 0 and 1 reduce in
  // [125, 170] and [170, 200]; backward ends at 162.
  add("grad p2", "grad_ready", 118, 120, {{"param", "2"}, {"bucket", "0"}});
  add("grad p1", "grad_ready", 148, 150, {{"param", "1"}, {"bucket", "1"}});
  add("grad p0", "grad_ready", 158, 160, {{"param", "0"}, {"bucket", "1"}});
  add("all-reduce bucket 0", "bucket", 125, 170, {{"bucket", "0"}, {"step", "1"}});
  add("all-reduce bucket 1", "bucket", 170, 200, {{"bucket", "1"}, {"step", "1"}});
  add("wait for buckets", "ddp_wait", 162, 201, {{"step", "1"}});
  const std::string path = testing_util::temp_path("ddp_events.json");
  testing_util::write_with_library(path, events);
  return load_trace_file(path).events;
}

TEST(DdpScene, TracePlansAndTheMeasuredStep) {
  const DdpModel m = model_of_sizes("1000,3000,2000");
  const ddp::BucketPlan before = ddp::plan_buckets(m.params, {2, 1, 0}, 4000, 10000);
  const ddp::BucketPlan after = ddp::plan_buckets(m.params, {2, 0, 1}, 8000, 1 << 20);
  const auto events = reducer_events(before, after);
  const std::optional<MeasuredDdp> got = measure_ddp_trace(events);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->before.buckets.size(), before.buckets.size());
  for (size_t b = 0; b < before.buckets.size(); ++b) EXPECT_EQ(got->before.buckets[b].params, before.buckets[b].params);
  ASSERT_TRUE(got->after.has_value());
  EXPECT_EQ(got->after->buckets.size(), 2u);
  EXPECT_EQ(got->model.params[1].bytes(), 12000);
  EXPECT_EQ(got->model.ready_order, (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(got->step, 1);
  // Hidden: bucket 0 all of its 45 us, bucket 1 none (it starts at 170 > 162): 45 of 75.
  EXPECT_EQ(got->overlap.all_reduce_us, 75);
  EXPECT_EQ(got->overlap.hidden_us, 37);  // [125, 162]
  EXPECT_EQ(got->overlap.exposed_us, 200 - 162);
  // Times from the first gradient's hook (118 us).
  ASSERT_EQ(got->measured.grads.size(), 3u);
  EXPECT_NEAR(got->measured.grads[1].begin_s, 2e-6, 1e-12);
  EXPECT_NEAR(got->measured.grads[1].end_s, 32e-6, 1e-12);
  EXPECT_NEAR(got->measured.all_reduces[0].begin_s, 7e-6, 1e-12);
  EXPECT_THROW(parse_plan_json("{\"names\":[\"a\"],\"sizes\":[4],\"buckets\":[{\"params\":[3]}]}"), std::invalid_argument);
  EXPECT_THROW(parse_plan_json("[1"), std::invalid_argument);
}

class DdpRender : public ::testing::Test {
 protected:
  DdpRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

TEST_F(DdpRender, EachAllReduceStartsAfterItsLastGradientBox) {
  Options o;
  o.model = "reordered";
  DdpPanel panel(o);
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const DdpFrameLayout& layout = panel.last_layout();
  ASSERT_EQ(layout.row_tops.size(), 4u);
  const DdpStep& s = panel.rebuilt_step();
  // 4 px into a row (boxes start 2 px in): above any centred label.
  const float compute_y = layout.row_tops[2] + 10.0f;
  const float comm_y = layout.row_tops[3] + 10.0f;
  for (const DdpStep::AllReduce& a : s.all_reduces) {
    // The bucket's last gradient: the latest-ending one in it.
    double last_end = 0.0;
    for (const DdpStep::Grad& g : s.grads)
      if (g.bucket == a.bucket) last_end = std::max(last_end, g.end_s);
    ASSERT_GE(a.begin_s, last_end - 1e-12);
    const Color want = bucket_color(a.bucket);
    const float x_ready = layout.axis.x_of(last_end);
    const float x_begin = layout.axis.x_of(a.begin_s), x_end = layout.axis.x_of(a.end_s);
    ASSERT_GT(x_end - x_begin, 8.0f) << "bucket " << a.bucket;
    // The gradient box ends at x_ready in the bucket's colour...
    EXPECT_TRUE(COLOR_AT(image, x_ready - 3, compute_y - 6, want, 2, 0)) << "bucket " << a.bucket;
    // ...the all-reduce box begins at or after it, in the same colour...
    EXPECT_TRUE(COLOR_AT(image, x_begin + 3, comm_y - 6, want, 2, 0)) << "bucket " << a.bucket;
    EXPECT_TRUE(COLOR_AT(image, x_end - 3, comm_y - 6, want, 2, 0)) << "bucket " << a.bucket;
    // ...and nothing of it is drawn before its last gradient was ready.
    std::string found;
    EXPECT_FALSE(testing_util::has_color_near(image, x_ready - 3, comm_y - 6, want, 2, 0, &found))
        << "bucket " << a.bucket << " found " << found;
  }
  // The optimizer waits for the last all-reduce.
  EXPECT_TRUE(COLOR_AT(image, layout.axis.x_of(s.optimizer.begin_s) + 3, compute_y - 6, category_color("optimizer"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, layout.axis.x_of(s.wait.begin_s) + 3, compute_y - 6, kWaitColor, 2, 0));

  // Strips: every cell wide enough shows its bucket's colour; between
  // buckets, the canvas.
  for (const DdpFrameLayout::Strip* strip : {&layout.before, &layout.after}) {
    for (size_t k = 0; k < strip->cells.size(); ++k) {
      const StripCell& c = strip->cells[k];
      if (c.x1 - c.x0 < 8) continue;
      EXPECT_TRUE(COLOR_AT(image, strip->min.x + c.x1 - 3, strip->min.y + 3, bucket_color(c.bucket), 2, 0));
      if (k + 1 < strip->cells.size() && strip->cells[k + 1].bucket != c.bucket)
        EXPECT_TRUE(COLOR_AT(image, strip->min.x + c.x1 + kBucketGap * 0.5f, strip->min.y + 3, kCanvasColor, 2, 0));
    }
  }
  // Before the rebuild the head's weight (ready first) is in the last bucket; after, in the first.
  const int n_before = static_cast<int>(layout.before.cells.size());
  EXPECT_EQ(layout.before.cells[n_before - 1].param, 0);
  EXPECT_EQ(layout.after.cells[1].param, 0);
}

TEST_F(DdpRender, MeasuredStepBesideTheModel) {
  const DdpModel m = model_of_sizes("1000,3000,2000");
  const auto events = reducer_events(ddp::plan_buckets(m.params, {2, 1, 0}, 4000, 10000),
                                     ddp::plan_buckets(m.params, {2, 0, 1}, 8000, 1 << 20));
  DdpPanel panel(small_model());
  ASSERT_TRUE(panel.set_trace(events));
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const DdpFrameLayout& layout = panel.last_layout();
  ASSERT_TRUE(layout.measured_drawn);
  const auto& a = panel.measured()->measured.all_reduces[0];  // bucket 0, [7, 52] us
  const float y = layout.measured_row_tops[1] + 4.0f;
  EXPECT_TRUE(COLOR_AT(image, layout.measured_axis.x_of(a.end_s) - 3, y, bucket_color(0), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, layout.measured_axis.x_of(a.begin_s) - 3, y, kCanvasColor, 2, 0));
}

// Lesson 08's own trace: one DDP for sections 1-3, then one per bucket cap
// of the sweep, all on the same ranks with step numbers starting again at
// 0. The panel shows one DDP at a time and finds in the file the plans and
// the overlap the lesson printed from its memory.
TEST_F(DdpRender, LessonEightTraceShowsEachDdpOfIt) {
  const std::string path = testing_util::temp_path("lesson08.json");
  std::string output;
  ASSERT_EQ(testing_util::run({VIZ_LESSON_08, "--width", "512", "--layers", "6", "--steps", "1", "--trace", path}, {},
                              &output, 120000),
            0)
      << output;
  // Section 1's plans: "    bucket 0  0.25 MiB  2 params: 6.bias 6.weight", before and after the rebuild.
  std::vector<std::vector<std::string>> printed_plans(2);
  int plan = -1;
  int64_t printed_step = -1;
  double printed_all_reduce_ms = -1, printed_hidden_ms = -1;
  std::vector<int> sweep_buckets;
  const std::regex bucket_line(R"(^\s+bucket \d+\s+[\d.]+ [KMG]?i?B\s+\d+ params: (.*)$)");
  const std::regex step_line(R"(^2\. One step from the trace: step (\d+) on rank 0)");
  // format_duration: "902.0 us", "9.11 ms", "1.20 s".
  const std::regex overlap_line(R"(^3\. Overlap: ([\d.]+) (us|ms|s) of all-reduce in \d+ buckets, ([\d.]+) (us|ms|s) of it)");
  auto ms = [](const std::string& value, const std::string& unit) {
    return std::stod(value) * (unit == "us" ? 1e-3 : unit == "s" ? 1e3 : 1.0);
  };
  // Half the last printed digit (format_seconds: "902.0 us", "9.11 ms",
  // "1.2 s"), in ms: a loaded machine's all-reduce can pass a second.
  auto half_digit_ms = [](const std::string& unit) { return unit == "us" ? 0.05e-3 : unit == "s" ? 50.0 : 0.005; };
  double all_reduce_tolerance_ms = 0, hidden_tolerance_ms = 0;
  const std::regex sweep_line(R"(^\s+(\d+ MiB|one per parameter)\s+(\d+)\s)");
  std::istringstream text(output);
  for (std::string line; std::getline(text, line);) {
    std::smatch m;
    if (line.rfind("1. The bucket plan", 0) == 0) plan = 0;
    if (line.find("after the rebuild") != std::string::npos) plan = 1;
    if (plan >= 0 && std::regex_search(line, m, bucket_line)) printed_plans[static_cast<size_t>(plan)].push_back(m[1]);
    if (std::regex_search(line, m, step_line)) printed_step = std::stoll(m[1]);
    if (std::regex_search(line, m, overlap_line)) {
      printed_all_reduce_ms = ms(m[1], m[2]);
      printed_hidden_ms = ms(m[3], m[4]);
      all_reduce_tolerance_ms = half_digit_ms(m[2]) + 1e-9;
      hidden_tolerance_ms = half_digit_ms(m[4]) + 1e-9;
    }
    if (std::regex_search(line, m, sweep_line)) sweep_buckets.push_back(std::stoi(m[2]));
  }
  ASSERT_FALSE(printed_plans[0].empty()) << output;
  ASSERT_FALSE(printed_plans[1].empty()) << output;
  ASSERT_GE(printed_step, 0) << output;
  ASSERT_GE(printed_all_reduce_ms, 0) << output;
  ASSERT_EQ(sweep_buckets.size(), 5u) << output;  // 1, 5, 25, 100 MiB and one per parameter

  auto names_of = [](const ddp::BucketPlan& p) {
    std::vector<std::string> buckets;
    for (const auto& bucket : p.buckets) {
      std::string names;
      for (int i : bucket.params) names += (names.empty() ? "" : " ") + p.params[static_cast<size_t>(i)].name;
      buckets.push_back(names);
    }
    return buckets;
  };
  DdpPanel panel(small_model());
  ASSERT_TRUE(panel.set_trace(load_trace_file(path).events));
  ASSERT_TRUE(panel.measured().has_value());
  const MeasuredDdp& first = *panel.measured();
  EXPECT_EQ(first.instance, 0);
  EXPECT_EQ(first.instances, 6);  // sections 1-3, then the five DDPs of the sweep (the naive row has none)
  EXPECT_EQ(names_of(first.before), printed_plans[0]);
  ASSERT_TRUE(first.after.has_value());
  EXPECT_EQ(names_of(*first.after), printed_plans[1]);
  EXPECT_EQ(first.step, printed_step);
  EXPECT_NEAR(first.overlap.all_reduce_us * 1e-3, printed_all_reduce_ms,
              all_reduce_tolerance_ms + 1e-3 * printed_all_reduce_ms);
  EXPECT_NEAR(first.overlap.hidden_us * 1e-3, printed_hidden_ms, hidden_tolerance_ms + 1e-3 * printed_hidden_ms);
  EXPECT_EQ(first.measured.all_reduces.size(), first.after->buckets.size());

  // Each DDP of the sweep: its own plan, its own steps.
  for (int k = 1; k <= 5; ++k) {
    panel.show_instance(k);
    const MeasuredDdp& m = *panel.measured();
    EXPECT_EQ(m.instance, k);
    const ddp::BucketPlan& shown = m.after ? *m.after : m.before;
    EXPECT_EQ(static_cast<int>(shown.buckets.size()), sweep_buckets[static_cast<size_t>(k - 1)]) << "DDP " << k;
    EXPECT_EQ(m.measured.all_reduces.size(), shown.buckets.size()) << "DDP " << k;
    EXPECT_GT(m.overlap.all_reduce_us, 0) << "DDP " << k;
  }

  // Drawn: the last DDP's measured step, each all-reduce box where its times put it.
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const DdpFrameLayout& layout = panel.last_layout();
  ASSERT_TRUE(layout.measured_drawn);
  const float y = layout.measured_row_tops[1] + 4.0f;
  int probed = 0;
  for (const auto& a : panel.measured()->measured.all_reduces) {
    const float x0 = layout.measured_axis.x_of(a.begin_s), x1 = layout.measured_axis.x_of(a.end_s);
    if (x1 - x0 < 6) continue;
    ++probed;
    EXPECT_TRUE(COLOR_AT(image, x1 - 3, y, bucket_color(a.bucket), 2, 0)) << "bucket " << a.bucket;
  }
  EXPECT_GT(probed, 0);
}

}  // namespace
}  // namespace distlab::viz
