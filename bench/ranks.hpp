// What the benchmarks that compare ranks share: a value from every rank, the
// bytes a rank sent, read from the trace, and their command line's -n, -w
// and the job they run on every rank.
#pragma once

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {

// Every rank's value, on every rank.
inline std::vector<double> gathered(comm::Communicator& world, double mine) {
  at::Tensor all = at::zeros({world.size()}, at::kDouble);
  all[world.rank()] = mine;
  world.native_all_reduce(all, comm::ReduceOp::kSum);
  return {all.data_ptr<double>(), all.data_ptr<double>() + world.size()};
}

// The bytes of every message `rank` sent in [from, to] (one "send" event each).
inline int64_t messages_sent(const trace::MemorySink& events, int rank, int64_t from, int64_t to) {
  int64_t bytes = 0;
  for (const trace::Event& e : events.events())
    if (e.rank == rank && e.category == "send" && e.begin_us >= from && e.end_us <= to) bytes += e.bytes;
  return bytes;
}

// -n (timed) and -w (untimed first) repetitions of `what` ("steps", "forwards").
inline void add_repetition_flags(CLI::App& cmd, int& iters, int& warmup, const std::string& what) {
  cmd.add_option("-n,--iters", iters, "timed " + what)->check(CLI::Range(1, 100000))->capture_default_str();
  cmd.add_option("-w,--warmup_iters", warmup, "untimed " + what + " first")->check(CLI::Range(0, 100000))
      ->capture_default_str();
}

// What a benchmark's set-up returns: the job its flags describe
// (Options::job), running run_rank(world, *o) on every rank; exit status 0.
template <typename Options>
std::function<int()> on_every_rank(std::shared_ptr<Options> o, void (*run_rank)(comm::Communicator&, const Options&)) {
  return [o, run_rank] {
    comm::run_job(comm::with_env_defaults(o->job), [&](comm::Communicator& world) { run_rank(world, *o); });
    return 0;
  };
}

}  // namespace distlab::bench
