// trace_frame_bench: how long the Trace panel takes to draw a frame of a
// large trace, rendered headless, zoomed out (the whole trace) and zoomed in.
//
//   build/bench/trace_frame_bench --events 1000000 --frames 30
//
// "ui" is building the frame (panel, layout, ImGui draw lists), "render" the
// OpenGL backend drawing it to glFinish (Mesa llvmpipe on a machine without
// a GPU). A frame must stay under 16 ms (60 frames per second).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "app.hpp"
#include "headless.hpp"
#include "synthetic_trace.hpp"
#include "trace/chrome_json.hpp"
#include "trace_loader.hpp"

namespace {

using namespace distlab::viz;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Summary {
  double mean = 0, median = 0, p95 = 0, max = 0;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Summary s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  s.median = v[v.size() / 2];
  s.p95 = v[std::min(v.size() - 1, static_cast<size_t>(v.size() * 0.95))];
  s.max = v.back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  SyntheticTraceOptions trace_options;
  trace_options.events = 1'000'000;
  trace_options.ranks = 8;
  int frames = 30;
  int width = 1920;
  int height = 1080;
  bool through_file = true;
  CLI::App cli{"Frame time of the Trace panel on a large trace, rendered headless"};
  cli.add_option("--events", trace_options.events, "Events in the trace")->check(CLI::Range(int64_t{1}, int64_t{20'000'000}));
  cli.add_option("--ranks", trace_options.ranks, "Ranks")->check(CLI::Range(2, 64));
  cli.add_option("--frames", frames, "Frames measured per case")->check(CLI::Range(1, 10000));
  cli.add_option("--width", width, "Frame width")->check(CLI::Range(320, 8192));
  cli.add_option("--height", height, "Frame height")->check(CLI::Range(240, 8192));
  cli.add_flag_callback("--no-file", [&through_file] { through_file = false; },
                        "Skip writing and reading the trace as JSON");
  CLI11_PARSE(cli, argc, argv);

  auto start = Clock::now();
  std::vector<distlab::trace::Event> events = make_synthetic_trace(trace_options);
  std::printf("generated %zu events on %d ranks: %.0f ms\n", events.size(), trace_options.ranks, ms_since(start));
  Options options;
  options.panel = "trace";
  App app(options);
  if (through_file) {
    const std::string path = "/tmp/distlab_trace_frame_bench_" + std::to_string(getpid()) + ".json";
    start = Clock::now();
    {
      distlab::trace::ChromeJsonSink sink(path);
      for (const auto& e : events) sink.write(e);
    }
    std::printf("written with trace::ChromeJsonSink: %.0f ms\n", ms_since(start));
    events.clear();
    events.shrink_to_fit();
    start = Clock::now();
    app.trace_panel().open_files({path});  // what --trace does: streamed into the model, finalized
    std::printf("opened as the panel does (stream into the model, sort, stack, pair flows): %.0f ms\n",
                ms_since(start));
    unlink(path.c_str());
  } else {
    start = Clock::now();
    app.trace_panel().set_events(events);
    std::printf("model built (sorted, stacked, flows paired): %.0f ms\n", ms_since(start));
    events.clear();
    events.shrink_to_fit();
  }
  std::printf("%zu events, %zu rows, %zu arrows\n", app.trace_panel().model().size(),
              app.trace_panel().model().rows().size(), app.trace_panel().model().flow_count());

  HeadlessRenderer renderer(width, height);
  setup_imgui(1.0f);
  const double trace_ms = app.trace_panel().model().seconds_of(app.trace_panel().model().end_us()) * 1e3;

  struct Case {
    const char* name;
    double begin_ms, end_ms;  // < 0: the whole trace
    ArrowMode arrows;
  };
  const double mid = trace_ms / 2;
  const Case cases[] = {
      {"zoomed out (whole trace), all arrows", -1, -1, ArrowMode::kAll},
      {"zoomed out (whole trace), no arrows", -1, -1, ArrowMode::kNone},
      {"1% of the trace, all arrows", mid, mid + trace_ms / 100, ArrowMode::kAll},
      {"zoomed in (5 ms), all arrows", mid, mid + 5, ArrowMode::kAll},
  };
  std::printf("\n%dx%d, %d frames per case, trace spans %.0f ms\n", width, height, frames, trace_ms);
  std::printf("%-40s %6s %6s %6s %7s %7s %7s %7s %7s %7s\n", "case", "boxes", "arrows", "draws", "vertices",
              "ui ms", "render", "total", "p95", "max");
  for (const Case& c : cases) {
    TracePanel& panel = app.trace_panel();
    if (c.begin_ms < 0)
      panel.set_view_ms(-trace_ms * 0.02, trace_ms * 1.02);
    else
      panel.set_view_ms(c.begin_ms, c.end_ms);
    panel.set_arrow_mode(c.arrows);
    for (int i = 0; i < 3; ++i) renderer.frame([&] { app.frame(); });  // warm-up: ImGui settles its layout
    std::vector<double> ui, render, total;
    FrameTiming last;
    for (int i = 0; i < frames; ++i) {
      const FrameTiming t = last = renderer.frame([&] { app.frame(); });
      ui.push_back(t.ui_ms);
      render.push_back(t.render_ms);
      total.push_back(t.total_ms());
    }
    const Summary u = summarize(ui), r = summarize(render), s = summarize(total);
    const TraceFrameLayout& layout = panel.last_layout();
    std::printf("%-40s %6zu %6zu %6d %7d %7.2f %7.2f %7.2f %7.2f %7.2f\n", c.name, layout.boxes, layout.arrows,
                last.draw_calls, last.vertices, u.mean, r.mean, s.mean, s.p95, s.max);
  }
  return 0;
}
