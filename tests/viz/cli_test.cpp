// distlab-viz from the command line: --screenshot renders with no display
// (the same pixels as rendering in-process), bad input ends with one clear
// message and a non-zero exit.
#include <gtest/gtest.h>

#include "app.hpp"
#include "options.hpp"
#include "render_helpers.hpp"
#include "synthetic_trace.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

int viz(const std::vector<std::string>& args, std::string* output) {
  std::vector<std::string> argv = {VIZ_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  // No display at all: the screenshot path must not need one.
  return run(argv, {"DISPLAY=", "WAYLAND_DISPLAY="}, output);
}

std::string sample_trace(const std::string& name) {
  SyntheticTraceOptions o;
  o.events = 2000;
  const std::string path = temp_path(name);
  write_with_library(path, make_synthetic_trace(o));
  return path;
}

TEST(Cli, ScreenshotIsTheSameFrameAsRenderingInProcess) {
  const std::string trace = sample_trace("cli.json");
  const std::string png = temp_path("cli.png");
  std::string out;
  ASSERT_EQ(viz({"--panel", "trace", "--trace", trace, "--view-ms", "0:12", "--screenshot", png, "--width", "900",
                 "--height", "500"},
                &out),
            0)
      << out;
  const Image from_cli = read_png(png);
  ASSERT_EQ(from_cli.width, 900);
  ASSERT_EQ(from_cli.height, 500);

  Options o;
  o.panel = "trace";
  o.trace_files = {trace};
  o.view_ms = "0:12";
  App app(o);
  HeadlessRenderer renderer(900, 500);
  setup_imgui(1.0f);
  for (int i = 0; i < 3; ++i) renderer.frame([&] { app.frame(); });
  const Image here = renderer.read_pixels();
  size_t different = 0;
  for (int y = 0; y < 500; ++y)
    for (int x = 0; x < 900; ++x) different += here.at(x, y) != from_cli.at(x, y);
  EXPECT_EQ(different, 0u);
  // And it shows the trace: rank 0's first forward pass, 4 px left of its
  // end (its label is at its left).
  const TraceFrameLayout& l = app.trace_panel().last_layout();
  const TraceModel& m = app.trace_panel().model();
  const EventRecord& first = m.record(m.rows()[0].levels[0].events[0]);
  ASSERT_EQ(m.text(first.category), "fwd");
  EXPECT_TRUE(COLOR_AT(from_cli, l.axis.x_of(m.seconds_of(first.end_us)) - 4, l.band_center(l.row_tops[0], 0),
                       category_color("fwd"), 2, 0));
}

TEST(Cli, CollectivesAndThePresetRenderHeadless) {
  const std::string png = temp_path("friends.png");
  std::string out;
  ASSERT_EQ(viz({"--preset", "friends", "--time", "12.5", "--screenshot", png}, &out), 0) << out;
  const Image image = read_png(png);
  EXPECT_EQ(image.width, 1600);
  EXPECT_EQ(image.height, 900);
}

TEST(Cli, BadInputEndsWithOneClearMessage) {
  const std::string broken = temp_path("broken.json");
  write_text(broken, "{\"traceEvents\": [ {\"ph\": \"X\", \"pid\": ");
  std::string out;
  EXPECT_EQ(viz({"--panel", "trace", "--trace", broken, "--screenshot", temp_path("x.png")}, &out), 1);
  EXPECT_NE(out.find(broken), std::string::npos) << out;
  EXPECT_NE(out.find("malformed"), std::string::npos) << out;

  EXPECT_EQ(viz({"--trace", temp_path("missing.json"), "--screenshot", temp_path("x.png")}, &out), 1);
  EXPECT_NE(out.find("cannot open"), std::string::npos) << out;

  EXPECT_NE(viz({"--ranks", "99"}, &out), 0);
  EXPECT_NE(out.find("--ranks"), std::string::npos) << out;
  EXPECT_NE(viz({"--collective", "broadcast", "--algorithms", "ring", "--screenshot", temp_path("x.png")}, &out), 0);
  EXPECT_NE(out.find("ring"), std::string::npos) << out;
  EXPECT_NE(viz({"--view-ms", "5:1"}, &out), 0);
  EXPECT_NE(out.find("BEGIN:END"), std::string::npos) << out;
}

TEST(Cli, CutShortTraceOpensWithAWarning) {
  const std::string trace = sample_trace("whole.json");
  const std::string text = read_text(trace);
  const std::string cut = temp_path("cut.json");
  write_text(cut, text.substr(0, text.size() / 2));
  std::string out;
  EXPECT_EQ(viz({"--panel", "trace", "--trace", cut, "--screenshot", temp_path("cut.png")}, &out), 0) << out;
  EXPECT_NE(out.find("cut short"), std::string::npos) << out;
}

TEST(Cli, ATraceFileOpensTheTracePanel) {
  auto panel_of = [](std::vector<const char*> args) {
    args.insert(args.begin(), "distlab-viz");
    Options o;
    EXPECT_FALSE(parse_options(static_cast<int>(args.size()), args.data(), o).has_value());
    return o.panel;
  };
  EXPECT_EQ(panel_of({}), "collectives");
  EXPECT_EQ(panel_of({"--trace", "a.json"}), "trace");
  EXPECT_EQ(panel_of({"--listen", "0"}), "trace");
  EXPECT_EQ(panel_of({"--trace", "a.json", "--panel", "collectives"}), "collectives");

  // The picture without --panel is the picture with --panel trace.
  const std::string trace = sample_trace("no_panel.json");
  const std::string with = temp_path("with_panel.png"), without = temp_path("without_panel.png");
  std::string out;
  ASSERT_EQ(viz({"--panel", "trace", "--trace", trace, "--screenshot", with, "--width", "640", "--height", "360"}, &out),
            0)
      << out;
  ASSERT_EQ(viz({"--trace", trace, "--screenshot", without, "--width", "640", "--height", "360"}, &out), 0) << out;
  const Image a = read_png(with), b = read_png(without);
  size_t different = 0;
  for (int y = 0; y < 360; ++y)
    for (int x = 0; x < 640; ++x) different += a.at(x, y) != b.at(x, y);
  EXPECT_EQ(different, 0u);
  // And it is not the Collectives panel.
  ASSERT_EQ(viz({"--panel", "collectives", "--trace", trace, "--screenshot", with, "--width", "640", "--height", "360"},
                &out),
            0);
  const Image c = read_png(with);
  different = 0;
  for (int y = 0; y < 360; ++y)
    for (int x = 0; x < 640; ++x) different += c.at(x, y) != b.at(x, y);
  EXPECT_GT(different, 1000u);
}

TEST(Cli, WithoutADisplayTheWindowSaysHowToRenderHeadless) {
  std::string out;
  EXPECT_EQ(viz({"--panel", "collectives"}, &out), 1);
  EXPECT_NE(out.find("--screenshot"), std::string::npos) << out;
}

}  // namespace
}  // namespace distlab::viz
