// The Trace panel rendered headless: boxes, merged runs, gaps and arrows have
// the expected colours at positions computed from the event times and the
// view (x = area left + (t - view begin) / view span * area width), not
// taken from the drawing code.
#include <gtest/gtest.h>
#include <imgui.h>

#include "render_helpers.hpp"
#include "trace_panel.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

constexpr int64_t kOrigin = 1'000'000;  // us on the trace clock

trace::Event ev(int rank, const char* lane, const char* name, const char* category, int64_t begin, int64_t end) {
  return trace::Event{rank, lane, name, category, kOrigin + begin, kOrigin + end, 0, -1, 0, {}};
}

// Rows: 0 = rank 0 compute, 1 = rank 0 comm, 2 = rank 1 compute, 3 = rank 1 comm.
std::vector<trace::Event> fixture() {
  std::vector<trace::Event> events = {
      ev(0, "compute", "forward", "fwd", 0, 4000),
      ev(0, "compute", "backward", "bwd", 5000, 9000),
      ev(1, "compute", "forward", "fwd", 0, 3000),
  };
  trace::Event send = ev(0, "comm", "send", "send", 9000, 9600);
  send.peer = 1;
  send.bytes = 4096;
  send.flow = trace::flow_id(0, 1, 0, 0);
  trace::Event recv = ev(1, "comm", "recv", "recv", 9100, 9800);
  recv.peer = 0;
  recv.bytes = 4096;
  recv.flow = send.flow;
  events.push_back(send);
  events.push_back(recv);
  // 400 events of 1 us, 2 us apart: far below a pixel at this zoom.
  for (int k = 0; k < 400; ++k) events.push_back(ev(1, "compute", "tiny", "step", 3000 + 2 * k, 3001 + 2 * k));
  return events;
}

class TraceRender : public ::testing::Test {
 protected:
  TraceRender() : renderer_(1200, 640) { panel_.set_events(fixture()); }

  Image render() {
    return render_in_window(renderer_, [this] { panel_.draw(); });
  }
  // Screen position of time `us` (relative to the first event) in row `row`.
  float x_of(int64_t us) const {
    const TraceFrameLayout& l = panel_.last_layout();
    return l.area_min.x + static_cast<float>((us * 1e-6 - view_begin_s_) / (view_end_s_ - view_begin_s_)) *
                              (l.area_max.x - l.area_min.x);
  }
  float y_of(int row) const {
    return panel_.last_layout().row_tops[row] + kRowPadding + kLevelHeight * 0.5f;
  }
  void view_ms(double begin, double end) {
    view_begin_s_ = begin * 1e-3;
    view_end_s_ = end * 1e-3;
    panel_.set_view_ms(begin, end);
  }

  HeadlessRenderer renderer_;
  TracePanel panel_;
  double view_begin_s_ = 0.0;
  double view_end_s_ = 0.0;
};

TEST_F(TraceRender, BoxesMergedRunsAndGapsAtTheirTimes) {
  view_ms(-0.5, 10.5);
  const Image image = render();
  const TraceFrameLayout& l = panel_.last_layout();
  ASSERT_TRUE(l.drawn);
  ASSERT_EQ(l.row_tops.size(), 4u);
  EXPECT_DOUBLE_EQ(l.axis.begin_s, view_begin_s_);
  EXPECT_DOUBLE_EQ(l.axis.end_s, view_end_s_);
  // One level per row: rows are 20 + 2 * 3 pixels apart.
  for (int r = 0; r < 3; ++r) EXPECT_FLOAT_EQ(l.row_tops[r + 1] - l.row_tops[r], kLevelHeight + 2 * kRowPadding);

  // Probes stay off the axis' grid lines (every 2 ms here) and 4 px left
  // of a box's right end: labels are drawn from the left.
  EXPECT_TRUE(COLOR_AT(image, x_of(4000) - 4, y_of(0), category_color("fwd"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(9000) - 4, y_of(0), category_color("bwd"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(4500), y_of(0), kCanvasColor, 2, 0));  // between forward and backward
  EXPECT_TRUE(COLOR_AT(image, x_of(9600) - 4, y_of(1), category_color("send"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(9800) - 4, y_of(3), category_color("recv"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(3000) - 4, y_of(2), category_color("fwd"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(3400), y_of(2), kMergedColor, 2, 0));  // the 400 tiny events
  EXPECT_TRUE(COLOR_AT(image, x_of(6300), y_of(2), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(2300), y_of(1), kCanvasColor, 2, 0));  // rank 0 comm: idle until 9 ms
  EXPECT_GE(l.merged_boxes, 1u);
}

TEST_F(TraceRender, ArrowFromSendToRecvOnlyWhenAsked) {
  view_ms(-0.5, 10.5);
  // The arrow leaves the send's begin (row 1) and lands on the recv's end
  // (row 3); its middle crosses row 2, empty there.
  const auto middle = [this] {
    return std::make_pair((x_of(9000) + x_of(9800)) * 0.5f, (y_of(1) + y_of(3)) * 0.5f);
  };
  panel_.set_arrow_mode(ArrowMode::kAll);
  Image image = render();
  auto [mx, my] = middle();
  EXPECT_TRUE(COLOR_AT(image, mx, my, kFlowColor, 90, 1));
  EXPECT_EQ(panel_.last_layout().arrows, 1u);

  panel_.set_arrow_mode(ArrowMode::kNone);
  image = render();
  EXPECT_TRUE(COLOR_AT(image, mx, my, kCanvasColor, 2, 0));
  EXPECT_EQ(panel_.last_layout().arrows, 0u);

  panel_.set_arrow_mode(ArrowMode::kSelected);
  panel_.select(0);  // forward: no message, no arrow
  image = render();
  EXPECT_TRUE(COLOR_AT(image, mx, my, kCanvasColor, 2, 0));
  panel_.select(4);  // the recv: its arrow
  image = render();
  EXPECT_TRUE(COLOR_AT(image, mx, my, kFlowColor, 90, 1));
}

TEST_F(TraceRender, ZoomedInTheSendFillsItsTime) {
  view_ms(8.9, 9.9);
  const Image image = render();
  EXPECT_TRUE(COLOR_AT(image, x_of(9300), y_of(1), category_color("send"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(8950), y_of(1), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(8950), y_of(0), category_color("bwd"), 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(9700), y_of(3), category_color("recv"), 2, 0));
}

TEST_F(TraceRender, ClickingABoxSelectsItAndShowsItsArrow) {
  view_ms(-0.5, 10.5);
  panel_.set_arrow_mode(ArrowMode::kSelected);
  render();
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2(x_of(9300), y_of(1));  // on the send
  for (bool down : {false, true, false}) {
    io.MouseDown[0] = down;
    render_in_window(renderer_, [this] { panel_.draw(); }, 1);
  }
  io.MousePos = ImVec2(-1, -1);
  const Image image = render();
  EXPECT_TRUE(COLOR_AT(image, (x_of(9000) + x_of(9800)) * 0.5f, (y_of(1) + y_of(3)) * 0.5f, kFlowColor, 90, 1));
  EXPECT_EQ(panel_.last_layout().arrows, 1u);
}

}  // namespace
}  // namespace distlab::viz
