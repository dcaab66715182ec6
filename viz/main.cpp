// distlab-viz: collectives animated from the cost model, and trace
// timelines from files or a live stream. See viz/README.md.
#include <cstdio>
#include <exception>

#include "app.hpp"
#include "headless.hpp"
#include "options.hpp"
#include "window.hpp"

namespace {

using namespace distlab::viz;

// A few frames, because ImGui sizes tables and tab bars from the frame
// before; the last one is written.
constexpr int kScreenshotFrames = 3;

int screenshot(App& app, const Options& options) {
  HeadlessRenderer renderer(options.width, options.height);
  setup_imgui(options.scale);
  for (int i = 0; i < kScreenshotFrames; ++i) renderer.frame([&app] { app.frame(); });
  write_png(renderer.read_pixels(), options.screenshot);
  std::printf("distlab-viz: wrote %s (%dx%d)\n", options.screenshot.c_str(), options.width, options.height);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (auto code = parse_options(argc, argv, options)) return *code;
  try {
    App app(options);
    for (const auto& message : app.messages()) std::fprintf(stderr, "distlab-viz: %s\n", message.c_str());
    if (!options.screenshot.empty()) return screenshot(app, options);
    return run_window(app, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distlab-viz: %s\n", e.what());
    return 1;
  }
}
