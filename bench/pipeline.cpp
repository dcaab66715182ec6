// distlab-bench pipeline: throughput of each schedule against the number of
// microbatches, on thread ranks (CPU), with the bubble measured from the
// trace beside the simulator's (fed the same run's measured action costs),
// beside the schedule's closed form (pipeline/closed_form.hpp, with the
// same costs) and beside the textbook (p-1)/(m+p-1).
//
//   distlab-bench pipeline --stages 2 4 --microbatches 1 2 4 8 16
//   distlab-bench pipeline --schedules zbv dualpipev --costs   (each row's measured F, B, I, W below it)
//
// The model: 8 layers of Linear(width, width) + Tanh, split evenly; a batch
// of --batch rows; MSE loss. Each row: -w untimed steps, then -n timed
// steps; time is the mean step; the bubbles are means over the timed steps,
// each step's simulated bubble computed from that step's own action costs.
//
// Columns:
//   sched  stages  v  m  step_ms  samples/s  measured  simulated  on_cores  closed  formula  gap
//   (measured, simulated: mean idle fraction of the ranks, simulated with a
//   core per rank; on_cores: simulated with the ranks sharing --cores
//   processors, which is this machine when there are more ranks than
//   cores, the same as simulated otherwise; closed: the schedule's closed
//   form with the step's F, B, W averaged over stages, "-" where the
//   formula does not hold for (p, m) (exact_for_shape) or there is none
//   (LoopedBFS), "<0" where these costs break its assumptions so far that
//   it goes negative (the zero-bubble ones assume W is only the weight
//   gradient; DistLab's W also walks the stage's graph again); formula: (p-1)/(m+p-1), GPipe's and 1F1B's, for reference on
//   every row; gap: |measured - on_cores| in percentage points)
// and a closing line per stage count: the rows whose gap is within 5 points.
// A shape a schedule refuses (DualPipeV needs m >= 2p, interleaved zero
// bubble m a multiple of its rounds) prints the rule instead of a row.
// DualPipeV's OVERLAP_F_B runs its halves one after the other on CPU ranks,
// so its closed form is taken with F&B = F + B (ActionCosts::overlap 0).
// When dualpipev runs, a closing line per stage count measures what
// overlapping would give here: every rank at once runs a forward and
// another microbatch's backward of its stages, in sequence and then on two
// threads together; on ranks that already share the cores the second is
// no faster.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "bench_registry.hpp"
#include "comm/intra_op_threads.hpp"
#include "comm/threads_backend.hpp"
#include "pipeline/closed_form.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/measure.hpp"

namespace distlab::bench {
namespace {

using namespace pipeline;

struct PipelineBenchOptions {
  std::vector<int> stages{2, 4};
  std::vector<int> microbatches{1, 2, 4, 8, 16};
  std::vector<std::string> schedules{"gpipe",          "1f1b", "interleaved", "looped_bfs", "zb_h1",
                                     "interleaved_zb", "zbv",  "dualpipev"};
  int width = 256, batch = 256, iters = 5, warmup = 2;
  bool costs = false;  // a line under each row: the measured F, B, I, W
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

constexpr int kLayers = 8;

struct Gaps {
  double own_core = 0, on_cores = 0;  // |measured - simulated|, percentage points
};

// One stage's costs for the closed forms, the mean of the measured stages'
// (a stage with split backwards has no B of its own: B = I + W there).
ActionCosts mean_stage(const ActionCosts& measured) {
  ActionCosts mean;
  mean.uniform = {0, 0, 0, 0};
  const double n = static_cast<double>(measured.per_stage.size());
  for (const StageCosts& s : measured.per_stage) {
    mean.uniform.forward += s.forward / n;
    mean.uniform.backward += (s.backward > 0 ? s.backward : s.backward_input + s.backward_weight) / n;
    mean.uniform.backward_input += s.backward_input / n;
    mean.uniform.backward_weight += s.backward_weight / n;
  }
  return mean;
}

Gaps run_row(const PipelineBenchOptions& o, ScheduleKind kind, int p, int m) {
  const int v = stages_per_rank_for(kind, 2), per_stage = kLayers / (p * v);
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
  double measured = 0, simulated = 0, shared = 0, closed = 0;
  bool has_closed = true;
  StageCosts mean{0, 0, 0, 0};  // over stages and timed steps
  for (int k = o.warmup; k < o.warmup + o.iters; ++k) {
    const Measured step = measure(sink->events(), schedule, k);
    measured += step.bubble / o.iters;
    simulated += simulate(schedule, step.costs).bubble / o.iters;
    shared += simulate(schedule, step.costs, o.cores).bubble / o.iters;
    const ActionCosts stage = mean_stage(step.costs);
    const std::optional<double> form = closed_form_bubble(schedule, stage);
    mean = {mean.forward + stage.uniform.forward / o.iters, mean.backward + stage.uniform.backward / o.iters,
            mean.backward_input + stage.uniform.backward_input / o.iters,
            mean.backward_weight + stage.uniform.backward_weight / o.iters};
    has_closed = has_closed && form.has_value();
    closed += form.value_or(0.0) / o.iters;
  }
  const Gaps gap{std::abs(measured - simulated) * 100.0, std::abs(measured - shared) * 100.0};
  char closed_text[16] = "-";
  if (has_closed && exact_for_shape(kind, p, m)) {
    if (closed < 0)
      std::snprintf(closed_text, sizeof closed_text, "<0");
    else
      std::snprintf(closed_text, sizeof closed_text, "%.3f", closed);
  }
  std::printf("%-14s %6d %2d %3d %9.2f %10.0f %9.3f %10.3f %9.3f %7s %8.3f %5.1f\n", kind_name(kind), p, v, m,
              step_s * 1e3, o.batch / step_s, measured, simulated, shared, closed_text, gpipe_bubble(p, m),
              gap.on_cores);
  if (o.costs)
    std::printf("#   per stage: F %.2f ms, B %.2f ms, I %.2f ms, W %.2f ms (B = I + W where the backward is split)\n",
                mean.forward * 1e3, mean.backward * 1e3, mean.backward_input * 1e3, mean.backward_weight * 1e3);
  std::fflush(stdout);
  return gap;
}

struct Within {
  int own_core = 0, on_cores = 0, rows = 0;
};

// One OVERLAP_F_B's halves on each of p rank threads at once, DualPipeV's
// chunk size (kLayers / 2p layers, batch / 2p rows): the forward of one
// microbatch and the backward of another, one after the other and then on
// two threads together. Mean milliseconds of each, slowest rank.
std::pair<double, double> overlap_probe(const PipelineBenchOptions& o, int p) {
  const int layers = std::max(1, kLayers / (2 * p)), rows = std::max(1, o.batch / (2 * p)), reps = 2 * o.iters;
  const comm::IntraOpThreads threads = comm::choose_intra_op_threads(p);
  std::mutex mutex;
  double sequential_ms = 0, together_ms = 0;
  comm::run_thread_ranks(p, [&](comm::Communicator& comm) {
    comm::set_intra_op_threads(threads);
    torch::nn::Sequential f_stage, b_stage;
    for (int l = 0; l < layers; ++l) {
      f_stage->push_back(torch::nn::Linear(o.width, o.width));
      f_stage->push_back(torch::nn::Tanh());
      b_stage->push_back(torch::nn::Linear(o.width, o.width));
      b_stage->push_back(torch::nn::Tanh());
    }
    const at::Tensor x = at::randn({rows, o.width});
    double times[2] = {0, 0};
    for (int k = 0; k < o.warmup + reps; ++k)
      for (int together = 0; together < 2; ++together) {
        const at::Tensor loss = b_stage->forward(x).square().mean();  // the other microbatch, its forward done
        comm.barrier();  // every rank at once, sharing the cores as in the pipeline
        const auto start = std::chrono::steady_clock::now();
        if (together) {
          std::thread backward([&] {
            comm::set_intra_op_threads(threads);  // the rank's share, on this thread too
            loss.backward();
          });
          f_stage->forward(x);
          backward.join();
        } else {
          f_stage->forward(x);
          loss.backward();
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (k >= o.warmup) times[together] += ms / reps;
      }
    std::lock_guard<std::mutex> lock(mutex);
    sequential_ms = std::max(sequential_ms, times[0]);
    together_ms = std::max(together_ms, times[1]);
  });
  return {sequential_ms, together_ms};
}

Registration reg("pipeline", "pipeline schedules: throughput and bubble vs microbatches, beside the simulator",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<PipelineBenchOptions>();
  cmd.add_option("--stages", o->stages, "pipeline ranks (thread ranks)")->capture_default_str();
  cmd.add_option("--microbatches", o->microbatches, "microbatch counts")->capture_default_str();
  cmd.add_option("--schedules", o->schedules, "any of gpipe 1f1b interleaved looped_bfs zb_h1 interleaved_zb zbv dualpipev")
      ->capture_default_str();
  cmd.add_option("--width", o->width, "Linear width")->capture_default_str();
  cmd.add_option("--batch", o->batch, "rows per step")->capture_default_str();
  cmd.add_option("--cores", o->cores, "processors the rank threads share, for the on_cores simulation")
      ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd.add_option("-n,--iters", o->iters, "timed steps per row")->capture_default_str();
  cmd.add_option("-w,--warmup_iters", o->warmup, "untimed steps first")->capture_default_str();
  cmd.add_flag("--costs", o->costs, "under each row, the measured F, B, I, W of a stage (means)");
  return [o] {
    std::printf("# %d layers Linear(%d)+Tanh, batch %d, threads backend, CPU; intra-op threads per rank: cores / "
                "ranks; bubbles: means over %d timed steps\n", kLayers, o->width, o->batch, o->iters);
    std::printf("%-14s %6s %2s %3s %9s %10s %9s %10s %9s %7s %8s %5s\n", "sched", "stages", "v", "m", "step_ms",
                "samples/s", "measured", "simulated", "on_cores", "closed", "formula", "gap");
    std::map<int, Within> within;  // by stages
    for (const std::string& name : o->schedules)
      for (int p : o->stages)
        for (int m : o->microbatches) {
          const ScheduleKind kind = parse_kind(name);
          try {
            make_schedule(kind, p, m, stages_per_rank_for(kind, 2));
          } catch (const ScheduleError& e) {
            std::printf("# %s %d stages m=%d skipped: %s\n", name.c_str(), p, m, e.what());
            continue;
          }
          const Gaps gap = run_row(*o, kind, p, m);
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
    if (std::find(o->schedules.begin(), o->schedules.end(), "dualpipev") != o->schedules.end())
      for (int p : o->stages) {
        const auto [sequential, together] = overlap_probe(*o, p);
        std::printf("# dualpipev OVERLAP_F_B halves on %d ranks at once: F then B %.2f ms, F and B on two threads "
                    "%.2f ms (%+.0f%%)\n", p, sequential, together, (together / sequential - 1.0) * 100.0);
      }
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
