// A traced program for the live-stream tests: `ranks` threads, each records
// `events` numbered events ("seq" = 0, 1, ...) through one recorder whose
// live sink goes to DISTLAB_TRACE_LIVE=HOST:PORT, as a lesson's does. Event
// i of a rank is a "work i" box on its compute lane, except every fourth
// (i % 4 == 3): a send to the right neighbour followed by a recv from the
// left one, on the comm lane, paired across ranks by flow ids.
// With --memory K, each rank then records K "memory ZeRO-2" counter samples
// (memory_sample below) and one "accounting ZeRO-2", as lib/zero does.
// Exits 1 if the live sink dropped anything.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "trace/config.hpp"
#include "trace/live_stream.hpp"

namespace trace = distlab::trace;

// Sample k of `rank`: parameters 1000 (rank + 1), gradients 100 k, optimizer
// state 7, buffers 0, activations 50 (k mod 3). tests/viz/live_test.cpp
// works the totals out from this rule.
trace::CounterValues memory_sample(int rank, int k) {
  return {{"parameters", 1000 * (rank + 1)},
          {"gradients", 100 * k},
          {"optimizer state", 7},
          {"buffers", 0},
          {"activations", 50 * (k % 3)}};
}

int main(int argc, char** argv) {
  int ranks = 2;
  int events = 100;
  int rank_offset = 0;
  CLI::App app{"Emit numbered trace events to the live listener in DISTLAB_TRACE_LIVE"};
  app.add_option("--ranks", ranks)->check(CLI::Range(1, 64));
  app.add_option("--events", events)->check(CLI::Range(0, 10'000'000));
  app.add_option("--rank-offset", rank_offset, "First rank number (one process per offset)");
  int memory = 0;
  app.add_option("--memory", memory, "Memory counter samples per rank, after the events")->check(CLI::Range(0, 100000));
  CLI11_PARSE(app, argc, argv);

  const trace::Config config = trace::Config::from_env();
  if (config.live.empty()) {
    std::fprintf(stderr, "live_emitter: set DISTLAB_TRACE_LIVE=HOST:PORT\n");
    return 2;
  }
  trace::Recorder recorder;
  auto live = std::make_shared<trace::LiveSink>(config.live);
  recorder.add_sink(live);

  std::vector<std::thread> threads;
  for (int local = 0; local < ranks; ++local) {
    threads.emplace_back([&, local] {
      const int rank = rank_offset + local;
      const int right = rank_offset + (local + 1) % ranks;
      const int left = rank_offset + (local + ranks - 1) % ranks;
      for (int i = 0; i < events; ++i) {
        const int64_t t = trace::now_us();
        const std::string seq = std::to_string(i);
        if (i % 4 != 3) {
          recorder.record({rank, trace::kLaneCompute, "work " + seq, "fwd", t, t + 1, 0, -1, 0, {{"seq", seq}}});
          continue;
        }
        const auto message = static_cast<uint64_t>(i / 4);
        recorder.record({rank, trace::kLaneComm, "send", "send", t, t + 2, 1024, right,
                         trace::flow_id(rank, right, 0, message), {{"seq", seq}}});
        recorder.record({rank, trace::kLaneComm, "recv", "recv", t, t + 3, 1024, left,
                         trace::flow_id(left, rank, 0, message), {{"seq", seq}}});
      }
      for (int k = 0; k < memory; ++k) recorder.counter(rank, "memory ZeRO-2", memory_sample(rank, k));
      if (memory > 0)
        recorder.counter(rank, "accounting ZeRO-2", {{"parameters", 1000 * (rank + 1)}, {"gradients", 250}});
    });
  }
  for (auto& t : threads) t.join();
  recorder.flush();
  if (live->dropped() > 0) {
    std::fprintf(stderr, "live_emitter: the live sink dropped %llu events\n",
                 static_cast<unsigned long long>(live->dropped()));
    return 1;
  }
  return 0;
}
