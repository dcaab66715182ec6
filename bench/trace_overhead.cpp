// distlab-bench trace: what tracing costs. Three settings side by side in one
// run: no recorder, a recorder with no sink (tracing off, the default), and
// a recorder writing to memory (tracing on).
//
//   distlab-bench trace
#include <torch/types.h>

#include <chrono>
#include <cstdio>

#include "bench_registry.hpp"
#include "comm/threads_backend.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {
namespace {

struct Setting {
  const char* name;
  std::shared_ptr<trace::Recorder> recorder;
};

std::vector<Setting> settings() {
  auto on = std::make_shared<trace::Recorder>();
  on->add_sink(std::make_shared<trace::MemorySink>());
  return {{"no recorder", nullptr}, {"tracing off", std::make_shared<trace::Recorder>()}, {"tracing on", on}};
}

// Nanoseconds per Span (construct + 2 args + destruct).
double span_ns(trace::Recorder* recorder, int iters) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    trace::Span span(recorder, 0, trace::kLaneComm, "step", "collective");
    span.arg("step", i).set_bytes(i);
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / iters;
}

// Microseconds per 8-byte round trip between two thread ranks.
double round_trip_us(const std::shared_ptr<trace::Recorder>& recorder, int iters) {
  comm::CommOptions options;
  options.recorder = recorder;
  double us = 0;
  comm::run_thread_ranks(2, [&](comm::Communicator& comm) {
    auto t = torch::zeros({2}, torch::kFloat32);
    const int peer = 1 - comm.rank();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      if (comm.rank() == 0) {
        comm.send(t, peer);
        comm.recv(t, peer);
      } else {
        comm.recv(t, peer);
        comm.send(t, peer);
      }
    }
    if (comm.rank() == 0)
      us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
  }, options);
  return us;
}

Registration reg("trace", "the cost of tracing, off and on, beside no recorder at all", [](CLI::App& cmd) {
  auto spans = std::make_shared<int>(2'000'000);
  auto trips = std::make_shared<int>(20'000);
  cmd.add_option("--spans", *spans, "Spans timed per setting")->capture_default_str();
  cmd.add_option("--round-trips", *trips, "8-byte round trips timed per setting")->capture_default_str();
  return [spans, trips] {
    std::printf("# distlab-bench trace: cost per traced scope and per 8-byte round trip (threads backend)\n");
    std::printf("#%-13s %12s %16s %18s\n", "setting", "span(ns)", "round trip(us)", "vs no recorder");
    double base = 0;
    for (int repeat = 0; repeat < 2; ++repeat) {  // the first pass warms caches and threads
      for (auto& s : settings()) {
        const double ns = span_ns(s.recorder.get(), *spans);
        const double us = round_trip_us(s.recorder, *trips);
        if (s.recorder == nullptr) base = us;
        if (repeat == 1) std::printf("%-14s %12.2f %16.2f %17.3fx\n", s.name, ns, us, us / base);
      }
    }
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
