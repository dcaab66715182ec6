// distlab-viz-make-trace: writes a synthetic data-parallel trace (see
// synthetic_trace.hpp) through the library's Chrome JSON sink, for the
// visualizer's tests, screenshots and benchmark.
//
//   distlab-viz-make-trace --out trace.json --events 1000000 --ranks 8
//   distlab-viz-make-trace --out zero.json --events 2000 --ranks 4 --memory-psi 25000000
//     (plus memory counter samples of DDP and ZeRO-1/2/3 over the same time)
#include <CLI/CLI.hpp>

#include <algorithm>
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
  int64_t memory_psi = 0;
  app.add_option("--memory-psi", memory_psi,
                 "Add memory samples of DDP and ZeRO-1/2/3 training this many fp32 parameters with Adam")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  CLI11_PARSE(app, argc, argv);
  try {
    auto events = distlab::viz::make_synthetic_trace(options);
    if (memory_psi > 0 && !events.empty()) {
      int64_t begin = events.front().begin_us, end = events.front().end_us;
      for (const auto& e : events) begin = std::min(begin, e.begin_us), end = std::max(end, e.end_us);
      const auto memory = distlab::viz::make_synthetic_memory(options.ranks, memory_psi, begin, end);
      events.insert(events.end(), memory.begin(), memory.end());
    }
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
