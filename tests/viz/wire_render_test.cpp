// The Wire panel rendered headless: pixels on the ring where the model's
// turns say the arc in flight and the free part are, at positions worked
// out here (centre, radius and angle, clockwise from 12 o'clock), not by
// the drawing code; the full and the empty ring; head and tail as step
// lines and the cursor on the plot; the panel opened from a trace file
// with --wire-ring and --wire-sample.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "app.hpp"
#include "render_helpers.hpp"
#include "viz_test_util.hpp"
#include "wire_panel.hpp"
#include "wire_samples.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

constexpr double kPi = 3.14159265358979;
const Color kSender = chunk_color(0), kReceiver = chunk_color(1);  // ranks 0 and 1 in the palette

// The point at `turn` (0 at 12 o'clock, clockwise on the screen) halfway
// through the annulus.
ImVec2 ring_point(const WireFrameLayout& l, double turn) {
  const double r = (l.inner_radius + l.outer_radius) * 0.5;
  return ImVec2(static_cast<float>(l.centre.x + r * std::sin(2 * kPi * turn)),
                static_cast<float>(l.centre.y - r * std::cos(2 * kPi * turn)));
}

// The colour at `turn` of the ring, `what` saying which sample and turn.
::testing::AssertionResult ring_color(const Image& image, const WireFrameLayout& l, double turn, Color want) {
  const ImVec2 p = ring_point(l, turn);
  return COLOR_AT(image, p.x, p.y, want, 2, 0) << " at turn " << turn;
}

// The plot's own mapping, written out: time t0..t1 across, bytes low..high up.
float plot_x(const WireFrameLayout& l, int64_t t) {
  return l.plot_left + float(double(t - l.t0_us) / double(l.t1_us - l.t0_us)) * (l.plot_right - l.plot_left);
}
float plot_y(const WireFrameLayout& l, int64_t bytes) {
  return l.plot_bottom - float(double(bytes - l.low) / double(l.high - l.low)) * (l.plot_bottom - l.plot_top);
}

class WireRender : public ::testing::Test {
 protected:
  WireRender() : renderer_(1200, 800) { setup_imgui(1.0f); }
  Image render(WirePanel& panel) { return render_in_window(renderer_, [&] { panel.draw(); }); }
  HeadlessRenderer renderer_;
};

// Sample 14: four chunks in flight from 5/8 of the ring across 12 o'clock
// to 1/8, the rest free.
TEST_F(WireRender, TheArcInFlightIsTheSendersColourTheRestFree) {
  WirePanel panel{Options{}};
  ASSERT_TRUE(panel.set_trace(wire_events()));
  ASSERT_TRUE(panel.select_ring({0, 1, "world d09c"}));
  EXPECT_EQ(panel.ring(), 0);
  panel.set_sample(13);
  const Image image = render(panel);
  const WireFrameLayout& l = panel.last_layout();
  ASSERT_TRUE(l.drawn);
  EXPECT_EQ(l.sample, 13);
  ASSERT_GT(l.outer_radius - l.inner_radius, 20.0f);
  EXPECT_EQ(l.occupied_color, kSender);
  EXPECT_EQ(l.caption,
            "sample 14 of 40 (rank 0, t = 130 us): head 262,144 B, tail 1,310,720 B, 1,048,576 B in flight "
            "(50.0% of the ring), 1,310,720 B moved");

  const WireView& v = l.view;
  ASSERT_DOUBLE_EQ(v.tail_turn, 0.625);
  ASSERT_DOUBLE_EQ(v.fill, 0.5);
  // The middle of each part, and points along it clear of the head and tail markers.
  EXPECT_TRUE(ring_color(image, l, v.tail_turn + v.fill * 0.5, kSender));
  EXPECT_TRUE(ring_color(image, l, v.head_turn + (1.0 - v.fill) * 0.5, kWireFreeColor));
  for (double f = 0.1; f < 0.95; f += 0.1) {
    EXPECT_TRUE(ring_color(image, l, v.tail_turn + f * v.fill, kSender));
    EXPECT_TRUE(ring_color(image, l, v.head_turn + f * (1.0 - v.fill), kWireFreeColor));
  }
  // Inside the hole and outside the ring: the canvas.
  EXPECT_TRUE(COLOR_AT(image, l.centre.x + l.inner_radius * 0.5f, l.centre.y + l.inner_radius * 0.5f, kCanvasColor,
                       2, 0));
}

TEST_F(WireRender, AFullRingIsAllInFlightAnEmptyOneAllFree) {
  WirePanel panel{Options{}};
  ASSERT_TRUE(panel.set_trace(wire_events()));
  for (const auto& [sample, want] : {std::pair<int, Color>{7, kSender}, {39, kWireFreeColor}}) {
    panel.set_sample(sample);
    const Image image = render(panel);
    const WireFrameLayout& l = panel.last_layout();
    ASSERT_EQ(l.sample, sample);
    const double marker = l.view.head_turn;  // head and tail meet in both
    for (int k = 0; k < 16; ++k) {
      const double turn = (k + 0.5) / 16.0;
      if (std::fabs(turn - marker) < 0.02) continue;
      EXPECT_TRUE(ring_color(image, l, turn, want)) << "sample " << sample + 1;
    }
  }
}

// Head in the sender's colour and tail in the receiver's, each holding its
// value until the next sample; the cursor at the sample's time.
TEST_F(WireRender, HeadAndTailOverTimeWithTheCursor) {
  WirePanel panel{Options{}};
  ASSERT_TRUE(panel.set_trace(wire_events()));
  panel.set_sample(13);
  const Image image = render(panel);
  const WireFrameLayout& l = panel.last_layout();
  const std::vector<RingStep> run = wire_run();
  EXPECT_EQ(l.t0_us, run.front().at_us);
  EXPECT_EQ(l.t1_us, run.back().at_us);
  EXPECT_EQ(l.low, 0);
  EXPECT_EQ(l.high, kWireMessage);
  EXPECT_EQ(l.head_color, kSender);
  EXPECT_EQ(l.tail_color, kReceiver);
  ASSERT_GT(l.plot_bottom - l.plot_top, 60.0f);
  for (size_t k : {2u, 9u, 20u, 30u}) {
    const float x = (plot_x(l, run[k].at_us) + plot_x(l, run[k + 1].at_us)) * 0.5f;
    EXPECT_TRUE(COLOR_AT(image, x, plot_y(l, run[k].head), kSender, 2, 1)) << "head after sample " << k + 1;
    EXPECT_TRUE(COLOR_AT(image, x, plot_y(l, run[k].tail), kReceiver, 2, 1)) << "tail after sample " << k + 1;
  }
  const float cursor = plot_x(l, run[13].at_us);
  EXPECT_TRUE(COLOR_AT(image, cursor, (l.plot_top + l.plot_bottom) * 0.5f, kCursorColor, 2, 1));
  EXPECT_FALSE(COLOR_AT(image, plot_x(l, run[25].at_us), (l.plot_top + l.plot_bottom) * 0.5f, kCursorColor, 2, 1));

  panel.step_forward();
  EXPECT_EQ(panel.sample(), 14);
  panel.set_sample(1000);
  EXPECT_EQ(panel.sample(), 39);
  panel.step_forward();
  EXPECT_EQ(panel.sample(), 39);
  panel.set_sample(0);
  panel.step_back();
  EXPECT_EQ(panel.sample(), 0);
}

TEST_F(WireRender, WithoutRingsTheNoteSaysHowToGetThem) {
  WirePanel panel{Options{}};
  EXPECT_FALSE(panel.set_trace({trace::counter_event(0, "memory DDP", {{"parameters", 5}}, 10)}));
  render(panel);
  EXPECT_FALSE(panel.last_layout().drawn);
  EXPECT_EQ(panel.sample_count(), 0);
}

// A trace file as the library writes it, opened by the App as
// `--panel wire --trace FILE --wire-ring 0->1 --wire-sample 14` would.
TEST_F(WireRender, TheAppOpensTheWireTabAtTheRingAndSampleAskedFor) {
  const std::string path = temp_path("wire.json");
  write_with_library(path, wire_events());
  Options o;
  o.panel = "wire";
  o.trace_files = {path};
  o.wire_ring = "0->1";
  o.wire_sample = 14;
  App app(o);
  for (const std::string& m : app.messages()) EXPECT_EQ(m.find("ring"), std::string::npos) << m;
  for (int i = 0; i < 3; ++i) renderer_.frame([&] { app.frame(); });
  const Image image = renderer_.read_pixels();
  const WireFrameLayout& l = app.wire_panel().last_layout();
  ASSERT_TRUE(l.drawn);
  EXPECT_EQ(l.sample, 13);
  EXPECT_TRUE(ring_color(image, l, l.view.tail_turn + l.view.fill * 0.5, kSender));

  o.wire_ring = "1->2";
  o.wire_sample = 99;
  App other(o);
  std::string said;
  for (const std::string& m : other.messages()) said += m + "\n";
  EXPECT_NE(said.find("no ring 1->2 in the trace (it holds: 0->1 (world d09c), 0->1 (world 59e2), 0->2, 1->0)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("ring 0->1 (world d09c) has 40 samples: showing the last"), std::string::npos) << said;
  EXPECT_EQ(other.wire_panel().sample(), 39);

  o.wire_ring = "0->1 (world 59e2)";
  o.wire_sample = 2;
  App second(o);
  EXPECT_EQ(second.wire_panel().ring(), 1);
  EXPECT_EQ(second.wire_panel().sample(), 1);

  // 0: the sample with the most bytes in flight, found here by a walk over
  // the run's samples as the test made them.
  o.wire_ring = "0->1";
  o.wire_sample = 0;
  App fullest(o);
  const std::vector<WireSample>& samples = fullest.wire_panel().model().rings()[0].samples;
  size_t want = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].head - samples[i].tail > samples[want].head - samples[want].tail) want = i;
  EXPECT_GT(samples[want].head - samples[want].tail, 0);
  EXPECT_EQ(fullest.wire_panel().sample(), static_cast<int>(want));
}

}  // namespace
}  // namespace distlab::viz
