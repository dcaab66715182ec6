// distlab-bench pipeline: throughput of each schedule against the number of
// microbatches, on thread ranks (CPU), with the bubble measured from the
// trace beside the simulator's (fed the same run's measured action costs)
// and beside the textbook (p-1)/(m+p-1).
//
//   distlab-bench pipeline --stages 2,4 --microbatches 1,2,4,8,16
//
// The model: 8 layers of Linear(width, width) + Tanh, split evenly; a batch
// of --batch rows; MSE loss. Each row: -w untimed steps, then -n timed
// steps; time is the mean step; the bubbles are means over the timed steps,
// each step's simulated bubble computed from that step's own action costs.
//
// Columns:
//   sched  stages  v  m  step_ms  samples/s  measured  simulated  on_cores  formula  gap
//   (measured, simulated: mean idle fraction of the ranks, simulated with a
//   core per rank; on_cores: simulated with the ranks sharing --cores
//   processors, which is this machine when there are more ranks than
//   cores, the same as simulated otherwise; formula: (p-1)/(m+p-1),
//   GPipe's and 1F1B's, for reference on every row; gap: |measured -
//   on_cores| in percentage points)
// and a closing line per stage count: the rows whose gap is within 5 points.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "bench_registry.hpp"
#include "comm/intra_op_threads.hpp"
#include "comm/threads_backend.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/measure.hpp"

namespace distlab::bench {
namespace {

using namespace pipeline;

struct PipelineBenchOptions {
  std::vector<int> stages{2, 4};
  std::vector<int> microbatches{1, 2, 4, 8, 16};
  std::vector<std::string> schedules{"gpipe", "1f1b", "interleaved", "looped_bfs", "zb_h1"};
  int width = 256, batch = 256, iters = 5, warmup = 2;
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

constexpr int kLayers = 8;

struct Gaps {
  double own_core = 0, on_cores = 0;  // |measured - simulated|, percentage points
};

Gaps run_row(const PipelineBenchOptions& o, ScheduleKind kind, int p, int m) {
  const bool looped = kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kLoopedBFS;
  const int v = looped ? 2 : 1, per_stage = kLayers / (p * v);
  const Schedule schedule = make_schedule(kind, p, m, v);
  auto recorder = std::make_shared<trace::Recorder>();
  auto sink = std::make_shared<trace::MemorySink>();
  recorder->add_sink(sink);
  comm::CommOptions options;
  options.recorder = recorder;
  double seconds = 0;
  // Each rank its share of the cores, as distlab's jobs do: a rank alone
  // on the machine must not compute faster than one with company.
  const comm::IntraOpThreads threads = comm::choose_intra_op_threads(p);
  comm::run_thread_ranks(p, [&](comm::Communicator& comm) {
    comm::set_intra_op_threads(threads);
    std::vector<StageModule> stages;
    for (int c = 0; c < v; ++c) {
      torch::nn::Sequential seq;
      for (int l = 0; l < per_stage; ++l) {
        seq->push_back(torch::nn::Linear(o.width, o.width));
        seq->push_back(torch::nn::Tanh());
      }
      stages.push_back(stage_of(seq));
    }
    ExecutorOptions eo;
    eo.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::nn::functional::mse_loss(y, t); };
    PipelineExecutor pipe(comm, schedule, stages, eo);
    const at::Tensor x = at::randn({o.batch, o.width}), y = at::randn({o.batch, o.width});
    for (int k = 0; k < o.warmup; ++k) pipe.step(x, y);
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < o.iters; ++k) pipe.step(x, y);
    comm.barrier();
    if (comm.rank() == 0) seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }, options);
  const double step_s = seconds / o.iters;
  double measured = 0, simulated = 0, shared = 0;
  for (int k = o.warmup; k < o.warmup + o.iters; ++k) {
    const Measured step = measure(sink->events(), schedule, k);
    measured += step.bubble / o.iters;
    simulated += simulate(schedule, step.costs).bubble / o.iters;
    shared += simulate(schedule, step.costs, o.cores).bubble / o.iters;
  }
  const Gaps gap{std::abs(measured - simulated) * 100.0, std::abs(measured - shared) * 100.0};
  std::printf("%-12s %6d %2d %3d %9.2f %10.0f %9.3f %10.3f %9.3f %8.3f %5.1f\n", kind_name(kind), p, v, m,
              step_s * 1e3, o.batch / step_s, measured, simulated, shared, gpipe_bubble(p, m), gap.on_cores);
  std::fflush(stdout);
  return gap;
}

struct Within {
  int own_core = 0, on_cores = 0, rows = 0;
};

Registration reg("pipeline", "pipeline schedules: throughput and bubble vs microbatches, beside the simulator",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<PipelineBenchOptions>();
  cmd.add_option("--stages", o->stages, "pipeline ranks (thread ranks)")->capture_default_str();
  cmd.add_option("--microbatches", o->microbatches, "microbatch counts")->capture_default_str();
  cmd.add_option("--schedules", o->schedules, "gpipe 1f1b interleaved looped_bfs zb_h1")->capture_default_str();
  cmd.add_option("--width", o->width, "Linear width")->capture_default_str();
  cmd.add_option("--batch", o->batch, "rows per step")->capture_default_str();
  cmd.add_option("--cores", o->cores, "processors the rank threads share, for the on_cores simulation")
      ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd.add_option("-n,--iters", o->iters, "timed steps per row")->capture_default_str();
  cmd.add_option("-w,--warmup_iters", o->warmup, "untimed steps first")->capture_default_str();
  return [o] {
    std::printf("# %d layers Linear(%d)+Tanh, batch %d, threads backend, CPU; intra-op threads per rank: cores / "
                "ranks; bubbles: means over %d timed steps\n", kLayers, o->width, o->batch, o->iters);
    std::printf("%-12s %6s %2s %3s %9s %10s %9s %10s %9s %8s %5s\n", "sched", "stages", "v", "m", "step_ms",
                "samples/s", "measured", "simulated", "on_cores", "formula", "gap");
    std::map<int, Within> within;  // by stages
    for (const std::string& name : o->schedules)
      for (int p : o->stages)
        for (int m : o->microbatches) {
          const Gaps gap = run_row(*o, parse_kind(name), p, m);
          within[p].own_core += gap.own_core <= 5.0 ? 1 : 0;
          within[p].on_cores += gap.on_cores <= 5.0 ? 1 : 0;
          ++within[p].rows;
        }
    for (const auto& [p, w] : within) {
      std::printf("# %d stages on %d core(s): %d of %d rows with measured bubble within 5 points of the simulator's",
                  p, o->cores, w.on_cores, w.rows);
      if (p > o->cores)
        std::printf(" on %d cores (%d of %d against a core per rank)", o->cores, w.own_core, w.rows);
      std::printf("\n");
    }
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
