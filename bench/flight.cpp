// distlab-bench flight: what the flight recorder costs, on by default as it
// is. A DDP step (step_bench.hpp's model) with the recorder on and paused,
// taking turns in one run, and the cost of one recorded operation alone.
//
//   distlab-bench flight                                   (2 thread ranks)
//   distlab-run --nproc-per-node 2 -- distlab-bench flight --backend gloo
#include <chrono>
#include <cstdio>

#include "bench_registry.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "flight/recorder.hpp"
#include "step_bench.hpp"

namespace distlab::bench {
namespace {

struct FlightBenchOptions : StepOptions {
  comm::JobOptions job;
  int records = 1'000'000;
};

// Nanoseconds per operation recorded straight into a ring: enter, start, end.
double ns_per_record(int records) {
  flight::Ring ring(0, 1, flight::kDefaultEntries);
  flight::Entry e;
  e.group = "world";
  e.kind = "collective";
  e.op = "all_reduce";
  e.algorithm = "ring";
  e.dtype = "float32";
  e.shape = {1024};
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < records; ++k) {
    e.seq = static_cast<uint64_t>(k);
    const uint64_t id = ring.enter(e);
    ring.start(id);
    ring.end(id, flight::State::kCompleted);
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / records;
}

void run(comm::Communicator& comm, const FlightBenchOptions& o) {
  share_cores(o.threads);
  auto model = make_model(o);
  auto optimizer = make_optimizer(o.optimizer)(model->parameters());
  const at::Tensor x = make_input(o);
  ddp::DdpOptions options;
  options.bucket_cap_bytes = o.bucket_cap_bytes();
  ddp::DistributedDataParallel ddp(comm, model.ptr(), options);
  auto step = [&] {
    compat::zero_grad(*optimizer);
    ddp.forward([&] { return loss_of(model->forward(x)); }).backward();
    optimizer->step();
  };
  flight::Ring& ring = *comm.flight_ring();
  for (int k = 0; k < o.warmup; ++k) step();
  std::vector<double> off, on;
  uint64_t recorded = 0;
  for (int r = 0; r < o.rounds; ++r) {  // turns, so that other load slows both alike
    ring.set_paused(true);
    off.push_back(seconds_per_step(comm, o.iters, step));
    ring.set_paused(false);
    const uint64_t before = ring.snapshot().recorded;
    on.push_back(seconds_per_step(comm, o.iters, step));
    recorded += ring.snapshot().recorded - before;
  }
  if (comm.rank() != 0) return;
  const double t_off = median(off), t_on = median(on);
  const double per_step = static_cast<double>(recorded) / (o.rounds * o.iters);
  const double ns = ns_per_record(o.records);
  std::printf("# distlab-bench flight: a DDP step (%.1f M parameters, %g MiB buckets, %d ranks, %s) with the flight "
              "recorder on and paused, medians of %d rounds of %d steps\n",
              o.parameters() / 1e6, o.bucket_mb, comm.size(), comm.backend().c_str(), o.rounds, o.iters);
  std::printf("%-10s %10s %10s %14s\n", "recorder", "step_ms", "vs_off", "records/step");
  std::printf("%-10s %10.2f %10.4f %14s\n", "off", t_off * 1e3, 1.0, "0");
  std::printf("%-10s %10.2f %10.4f %14.1f\n", "on", t_on * 1e3, t_on / t_off, per_step);
  std::printf("# one recorded operation (enter, start, end) costs %.0f ns: %.1f records/step = %.4f%% of the step; "
              "the target is < 1%%\n",
              ns, per_step, 100.0 * per_step * ns * 1e-9 / t_off);
}

Registration reg("flight", "the flight recorder's cost: a DDP step with it on and paused, side by side",
                 [](CLI::App& cmd) {
                   auto o = std::make_shared<FlightBenchOptions>();
                   o->job.ranks = 2;
                   o->rounds = 5;
                   comm::add_job_flags(cmd, o->job);
                   add_step_flags(cmd, *o);
                   cmd.add_option("--records", o->records, "operations timed straight into a ring")
                       ->capture_default_str();
                   return [o] {
                     comm::run_job(comm::with_env_defaults(o->job), [&](comm::Communicator& comm) { run(comm, *o); });
                     return 0;
                   };
                 });

}  // namespace
}  // namespace distlab::bench
