// The memory view rendered headless. The Memory panel's bars are measured in
// pixels and their heights compared with the totals worked out here from
// the samples, and a bar's tooltip is read back as text from ImGui's log
// and compared with the model's bytes; the Trace panel's memory track is
// probed at positions computed from the sample times and the view (x =
// area left + (t - view begin) / view span * area width), not taken from
// the drawing code.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "app.hpp"
#include "memory_panel.hpp"
#include "render_helpers.hpp"
#include "timeline.hpp"
#include "trace_panel.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

constexpr int64_t kMB = 1'000'000;
constexpr int kRanks = 4;
constexpr int64_t kOrigin = 2'000'000;  // us on the trace clock

using Bytes = std::array<int64_t, 5>;  // parameters, gradients, optimizer state, buffers, activations

trace::Event sample(int rank, const std::string& name, int64_t at_us, const Bytes& b) {
  return trace::counter_event(rank, name,
                              {{"parameters", b[0]}, {"gradients", b[1]}, {"optimizer state", b[2]},
                               {"buffers", b[3]}, {"activations", b[4]}},
                              at_us);
}

int64_t total(const Bytes& b) { return b[0] + b[1] + b[2] + b[3] + b[4]; }

// Psi = 10 M parameters on 4 ranks, fp32 Adam: the paper's bytes per stage
// (parameters, gradients, optimizer state) and, measured, those plus 2 MB
// of buffers and 30 MB of activations at the peak (mid-step), which are
// gone again after the step.
const std::vector<std::string> kStages = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
Bytes formula(size_t stage) {
  const int64_t psi = 10 * kMB;
  switch (stage) {
    case 0: return {4 * psi, 4 * psi, 8 * psi, 0, 0};
    case 1: return {4 * psi, 4 * psi, 2 * psi, 0, 0};
    case 2: return {4 * psi, psi, 2 * psi, 0, 0};
    default: return {psi, psi, 2 * psi, 0, 0};
  }
}
Bytes peak_of(size_t stage, int rank) {
  Bytes b = formula(stage);
  b[3] = 2 * kMB;
  b[4] = 30 * kMB + rank * kMB;
  return b;
}

std::vector<trace::Event> memory_run() {
  std::vector<trace::Event> events;
  int64_t t = kOrigin;
  for (size_t g = 0; g < kStages.size(); ++g) {
    for (int r = 0; r < kRanks; ++r) {
      Bytes before = formula(g);
      before[2] = 0;  // Adam's state appears at the first step
      Bytes after = peak_of(g, r);
      after[4] = 0;
      events.push_back(sample(r, "memory " + kStages[g], t, before));
      events.push_back(sample(r, "memory " + kStages[g], t + 400, peak_of(g, r)));
      events.push_back(sample(r, "memory " + kStages[g], t + 800, after));
      events.push_back(sample(r, "accounting " + kStages[g], t + 800, formula(g)));
    }
    t += 1000;
  }
  return events;
}

bool is_one_of(Color c, bool formula_bar) {
  for (int s = 0; s < kMemorySeriesCount; ++s)
    if (color_distance(c, formula_bar ? memory_formula_color(s) : memory_series_color(s)) <= 3) return true;
  return false;
}

// The bar in column x, measured in pixels: its bottom row and its height
// (rows of series colours, from the first one at most 4 rows above
// `bottom` upwards).
std::pair<int, int> measure_bar(const Image& image, float x, float bottom, bool formula_bar) {
  const int cx = static_cast<int>(std::floor(x));
  int y = static_cast<int>(std::floor(bottom)) + 1;
  while (y > bottom - 5 && !is_one_of(image.at(cx, y), formula_bar)) --y;
  const int base = y;
  while (y > 0 && is_one_of(image.at(cx, y), formula_bar)) --y;
  return {base, base - y};
}

class MemoryRender : public ::testing::Test {
 protected:
  MemoryRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

TEST_F(MemoryRender, BarsAreStackedToOneScale) {
  MemoryModel memory;
  for (const trace::Event& e : memory_run()) memory.add(e);
  MemoryPanel panel{Options{}};
  const Image image = render_in_window(renderer_, [&] { panel.draw(memory, kOrigin); });
  const MemoryFrameLayout& layout = panel.last_layout();
  ASSERT_TRUE(layout.drawn);
  ASSERT_EQ(layout.bars.size(), kStages.size() * kRanks * 2);

  // The tallest bar: DDP's measured peak on rank 3, 160 + 2 + 33 MB.
  const int64_t tallest = total(peak_of(0, 3));
  int tallest_px = 0;
  for (const MemoryBar& bar : layout.bars)
    if (bar.stage == "DDP" && bar.rank == 3 && bar.kind == MemoryKind::kMeasured)
      tallest_px = measure_bar(image, (bar.x0 + bar.x1) * 0.5f, layout.chart_bottom, false).second;
  ASSERT_GT(tallest_px, 300);  // most of the chart's height

  std::map<std::string, int> rank0_px;
  for (const MemoryBar& bar : layout.bars) {
    const size_t g = static_cast<size_t>(std::find(kStages.begin(), kStages.end(), bar.stage) - kStages.begin());
    ASSERT_LT(g, kStages.size()) << bar.stage;
    const bool formula_bar = bar.kind == MemoryKind::kAccounting;
    const Bytes want = formula_bar ? formula(g) : peak_of(g, bar.rank);
    const std::string what = bar.stage + " rank " + std::to_string(bar.rank) + (formula_bar ? " formula" : " measured");
    ASSERT_GT(bar.x1 - bar.x0, 8.0f) << what;
    const float x = (bar.x0 + bar.x1) * 0.5f;
    const auto [base, height] = measure_bar(image, x, layout.chart_bottom, formula_bar);
    // Heights in proportion to the totals, within 2 pixels.
    const double expected = tallest_px * static_cast<double>(total(want)) / static_cast<double>(tallest);
    EXPECT_NEAR(height, expected, 2.0) << what;
    if (!formula_bar && bar.rank == 0) rank0_px[bar.stage] = height;
    // Each series in its colour, at its share of the bar, from the bottom up.
    int64_t below = 0;
    for (int s = 0; s < kMemorySeriesCount; ++s) {
      const double y0 = base + 1 - height * static_cast<double>(below) / static_cast<double>(total(want));
      below += want[s];
      const double y1 = base + 1 - height * static_cast<double>(below) / static_cast<double>(total(want));
      if (y0 - y1 < 6.0) continue;  // too thin to probe
      const Color color = formula_bar ? memory_formula_color(s) : memory_series_color(s);
      EXPECT_TRUE(COLOR_AT(image, x, static_cast<float>((y0 + y1) * 0.5), color, 3, 0)) << what << " series " << s;
    }
    // Nothing of it above its top.
    EXPECT_FALSE(is_one_of(image.at(static_cast<int>(x), base - height - 2), formula_bar)) << what;
  }
  // DDP's bar against ZeRO-3's on rank 0: the ratio of their totals.
  const double ratio = static_cast<double>(total(peak_of(3, 0))) / static_cast<double>(total(peak_of(0, 0)));
  EXPECT_NEAR(rank0_px["ZeRO-3"], rank0_px["DDP"] * ratio, 2.0);
  EXPECT_LT(rank0_px["ZeRO-3"], rank0_px["DDP"] / 2);  // 72 MB against 195 MB

  // Stages left to right in the order they ran; each rank's measured bar
  // just left of its formula.
  for (size_t i = 1; i < layout.bars.size(); ++i) EXPECT_GT(layout.bars[i].x0, layout.bars[i - 1].x1 - 0.01f);
}

// Renders `draw` as render_in_window does and returns, line by line, the
// text ImGui itself logged (ImGui::LogToFile) while drawing the last frame:
// what reached the screen as text, not what the panel says it drew.
std::vector<std::string> render_logging_text(HeadlessRenderer& renderer, const std::function<void()>& draw,
                                             Image* image) {
  const std::string path = temp_path("memory_rendered_text.txt");
  std::remove(path.c_str());  // ImGui appends
  constexpr int kFrames = 3;
  int frame = 0;
  *image = render_in_window(
      renderer,
      [&] {
        if (++frame == kFrames) ImGui::LogToFile(-1, path.c_str());
        draw();
        ImGui::LogFinish();
      },
      kFrames);
  std::vector<std::string> lines;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find_first_not_of(' '), last = line.find_last_not_of(' ');
    if (first != std::string::npos) lines.push_back(line.substr(first, last - first + 1));
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST_F(MemoryRender, HoveringABarShowsItsBytes) {
  MemoryModel memory;
  for (const trace::Event& e : memory_run()) memory.add(e);
  MemoryPanel panel{Options{}};
  render_in_window(renderer_, [&] { panel.draw(memory, kOrigin); });
  const MemoryBar bar = panel.last_layout().bars[2];  // DDP, rank 1, measured
  ASSERT_EQ(bar.stage, "DDP");
  ASSERT_EQ(bar.rank, 1);
  ASSERT_EQ(bar.kind, MemoryKind::kMeasured);
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2((bar.x0 + bar.x1) * 0.5f, panel.last_layout().chart_bottom - 5);
  Image with;
  const std::vector<std::string> lines = render_logging_text(renderer_, [&] { panel.draw(memory, kOrigin); }, &with);
  io.MousePos = ImVec2(-1, -1);
  const Image without = render_in_window(renderer_, [&] { panel.draw(memory, kOrigin); });
  // The tooltip covers some of the chart right of the mouse.
  size_t different = 0;
  for (int y = 0; y < with.height; ++y)
    for (int x = 0; x < with.width; ++x) different += with.at(x, y) != without.at(x, y);
  EXPECT_GT(different, 2000u);

  // Its text: rank 1's peak sample in the model, each series and the total
  // as the panel formats bytes, under a heading naming the bar.
  const std::optional<MemorySample> peak = memory.peak("DDP", 1), other = memory.peak("DDP", 0);
  ASSERT_TRUE(peak && other);
  ASSERT_NE(format_bytes(static_cast<double>(peak->total())), format_bytes(static_cast<double>(other->total())));
  const auto heading = std::find(lines.begin(), lines.end(), "DDP, rank 1: measured peak");
  ASSERT_NE(heading, lines.end()) << joined(lines);
  // The bytes on the first line after the heading that starts with `label`.
  auto shown = [&](const std::string& label) -> std::string {
    for (auto line = heading; line != lines.end(); ++line)
      if (line->rfind(label + " ", 0) == 0) return line->substr(line->find_first_not_of(' ', label.size()));
    return "no line for " + label;
  };
  for (int s = 0; s < kMemorySeriesCount; ++s) {
    const char* series = kMemorySeries[static_cast<size_t>(s)];
    EXPECT_EQ(shown(series), format_bytes(static_cast<double>(peak->bytes[s]))) << joined(lines);
  }
  EXPECT_EQ(shown("total"), format_bytes(static_cast<double>(peak->total()))) << joined(lines);
}

// Rows of intervals on ranks 0 and 1 over [0, 10] ms, and under them the
// memory track: rank 0 at 100, 300, 150 MB from 1, 3, 6 ms; rank 1 at 200,
// 250 MB from 2, 5 ms (each total held until the next sample, the last
// until the trace ends).
struct TrackFixture {
  std::vector<trace::Event> events;
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> samples;  // rank -> (us after origin, total)
};

TrackFixture track_fixture() {
  TrackFixture f;
  for (int r = 0; r < 2; ++r) {
    f.events.push_back(trace::Event{r, "compute", "forward", "fwd", kOrigin, kOrigin + 4000, 0, -1, 0, {}});
    f.events.push_back(trace::Event{r, "compute", "backward", "bwd", kOrigin + 5000, kOrigin + 10000, 0, -1, 0, {}});
  }
  f.samples[0] = {{1000, 100 * kMB}, {3000, 300 * kMB}, {6000, 150 * kMB}};
  f.samples[1] = {{2000, 200 * kMB}, {5000, 250 * kMB}};
  for (const auto& [rank, points] : f.samples)
    for (const auto& [at, bytes] : points)
      f.events.push_back(sample(rank, "memory ZeRO-1", kOrigin + at, {bytes / 2, bytes / 4, bytes / 4, 0, 0}));
  f.events.push_back(sample(0, "accounting ZeRO-1", kOrigin + 9000, {900 * kMB, 0, 0, 0, 0}));  // not on the track
  return f;
}

class TrackRender : public ::testing::Test {
 protected:
  TrackRender() : renderer_(1200, 640) { panel_.set_events(fixture_.events); }

  Image render_view(double begin_ms, double end_ms) {
    begin_s_ = begin_ms * 1e-3;
    end_s_ = end_ms * 1e-3;
    panel_.set_view_ms(begin_ms, end_ms);
    return render_in_window(renderer_, [this] { panel_.draw(); });
  }
  float x_of(int64_t us) const {
    const TraceFrameLayout& l = panel_.last_layout();
    return l.area_min.x + static_cast<float>((us * 1e-6 - begin_s_) / (end_s_ - begin_s_)) * (l.area_max.x - l.area_min.x);
  }
  // The top of the step for `bytes` in track row `row`: the largest total
  // (300 MB) kMemoryTrackPad under the row's top, 0 as far over its bottom.
  float y_of(size_t row, int64_t bytes) const {
    const float top = panel_.last_layout().memory_row_tops[row];
    const float span = kMemoryTrackRowHeight - 2 * kMemoryTrackPad;
    return top + kMemoryTrackPad + span * (1.0f - static_cast<float>(bytes) / static_cast<float>(300 * kMB));
  }

  TrackFixture fixture_ = track_fixture();
  HeadlessRenderer renderer_;
  TracePanel panel_;
  double begin_s_ = 0.0, end_s_ = 0.0;
};

TEST_F(TrackRender, EachRanksTotalIsAStepUnderTheRows) {
  const Image image = render_view(-0.5, 10.5);
  const TraceFrameLayout& l = panel_.last_layout();
  ASSERT_TRUE(l.memory_drawn);
  ASSERT_EQ(l.memory_ranks, (std::vector<int>{0, 1}));
  ASSERT_EQ(l.memory_row_tops.size(), 2u);
  EXPECT_EQ(l.memory_full_bytes, 300 * kMB);
  // The rows' time axis: the same pixel for the same time, and the track
  // under the last row.
  for (double t : {0.0, 0.0037, 0.01}) EXPECT_NEAR(l.memory_axis.x_of(t), l.axis.x_of(t), 0.01);
  ASSERT_EQ(l.row_tops.size(), 2u);  // the counters made no rows
  EXPECT_GT(l.memory_row_tops[0], l.row_tops[1] + kLevelHeight);

  for (size_t row = 0; row < 2; ++row) {
    const auto& points = fixture_.samples[l.memory_ranks[row]];
    for (size_t i = 0; i < points.size(); ++i) {
      const int64_t until = i + 1 < points.size() ? points[i + 1].first : 10000;  // the trace's end
      const float x = (x_of(points[i].first) + x_of(until)) * 0.5f;
      const float y = y_of(row, points[i].second);
      const std::string what = "row " + std::to_string(row) + " step " + std::to_string(i);
      EXPECT_TRUE(COLOR_AT(image, x, y + 4, kMemoryTrackFillColor, 2, 1)) << what;  // under the line: filled
      if (y - 5 > l.memory_row_tops[row] + 1) {
        EXPECT_TRUE(COLOR_AT(image, x, y - 5, kCanvasColor, 2, 1)) << what;  // over it: nothing
      }
    }
    // Before the first sample: nothing at all.
    const float before = (x_of(0) + x_of(points[0].first)) * 0.5f;
    EXPECT_TRUE(COLOR_AT(image, before, y_of(row, 0) - 3, kCanvasColor, 2, 1)) << "row " << row;
  }
}

TEST_F(TrackRender, ZoomsAndPansWithTheRows) {
  // 2.5 .. 4.5 ms: rank 0 is at 300 MB from 3 ms, 100 MB before.
  const Image image = render_view(2.5, 4.5);
  const TraceFrameLayout& l = panel_.last_layout();
  ASSERT_TRUE(l.memory_drawn);
  EXPECT_NEAR(l.memory_axis.begin_s, 2.5e-3, 1e-12);
  EXPECT_NEAR(l.memory_axis.end_s, 4.5e-3, 1e-12);
  const float middle = (y_of(0, 300 * kMB) + y_of(0, 100 * kMB)) * 0.5f;
  EXPECT_TRUE(COLOR_AT(image, x_of(4000), middle, kMemoryTrackFillColor, 2, 1));
  EXPECT_TRUE(COLOR_AT(image, x_of(2750), middle, kCanvasColor, 2, 1));
  // The step up is at 3 ms, where the rows above put 3 ms.
  EXPECT_TRUE(COLOR_AT(image, x_of(3000) + 3, middle, kMemoryTrackFillColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(3000) - 4, middle, kCanvasColor, 2, 0));
}

// distlab-viz --panel memory --trace FILE: the Memory tab, drawn from the
// file's samples; --help lists the panel.
TEST(MemoryApp, PanelMemoryShowsTheFilesSamples) {
  const std::string path = temp_path("memory_app.json");
  write_with_library(path, memory_run());
  Options o;
  o.panel = "memory";
  o.trace_files = {path};
  App app(o);
  for (const std::string& m : app.messages()) EXPECT_EQ(m.find("no memory"), std::string::npos) << m;
  HeadlessRenderer renderer(1280, 720);
  setup_imgui(1.0f);
  for (int i = 0; i < 3; ++i) renderer.frame([&] { app.frame(); });
  const MemoryFrameLayout& layout = app.memory_panel().last_layout();
  ASSERT_TRUE(layout.drawn);
  EXPECT_EQ(layout.bars.size(), kStages.size() * kRanks * 2);
  EXPECT_EQ(layout.full_bytes, total(peak_of(0, 3)));

  // A trace without memory samples says so.
  const std::string plain = temp_path("memory_app_plain.json");
  write_with_library(plain, {trace::Event{0, "compute", "forward", "fwd", 0, 10, 0, -1, 0, {}}});
  Options p = o;
  p.trace_files = {plain};
  App without(p);
  bool said = false;
  for (const std::string& m : without.messages()) said |= m.find("no memory samples") != std::string::npos;
  EXPECT_TRUE(said);

  std::string help;
  ASSERT_EQ(run({VIZ_BINARY, "--help"}, {}, &help), 0) << help;
  EXPECT_NE(help.find(",memory}"), std::string::npos) << help;  // among --panel's choices
}

}  // namespace
}  // namespace distlab::viz
