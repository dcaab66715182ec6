// distlab-viz-make-trace: writes a synthetic data-parallel trace (see
// synthetic_trace.hpp) through the library's Chrome JSON sink, for the
// visualizer's tests, screenshots and benchmark.
//
//   distlab-viz-make-trace --out trace.json --events 1000000 --ranks 8
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "synthetic_trace.hpp"
#include "trace/chrome_json.hpp"

int main(int argc, char** argv) {
  distlab::viz::SyntheticTraceOptions options;
  std::string out;
  CLI::App app{"Write a synthetic DistLab trace (Chrome JSON) through trace::ChromeJsonSink"};
  app.add_option("--out", out, "Output file")->required();
  app.add_option("--events", options.events, "Number of events")->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  app.add_option("--ranks", options.ranks, "Ranks")->check(CLI::Range(2, 256));
  app.add_option("--seed", options.seed, "Random seed of the durations");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto events = distlab::viz::make_synthetic_trace(options);
    distlab::trace::ChromeJsonSink sink(out);
    for (const auto& e : events) sink.write(e);
    sink.close();
    std::printf("wrote %zu events on %d ranks to %s\n", events.size(), options.ranks, out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distlab-viz-make-trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
