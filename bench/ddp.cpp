// distlab-bench ddp: DistLab's DistributedDataParallel, timed.
//
//   distlab-run --nproc-per-node 2 -- distlab-bench ddp --backend gloo
//   /usr/bin/python3 bench/ddp_vs_pytorch.py      (against PyTorch's own DDP)
//
// The model, data, options and timing are step_bench.hpp's (at the defaults
// 25.2 M parameters, 101 MB of float32 gradients, SGD); a step is forward,
// backward with DDP's wait, optimizer step; the median round is shown.
//
// Parts (--parts):
//   overlap  DDP (buckets all-reduced during backward) against the naive
//            version (ddp::average_gradients after backward) and against no
//            communication at all; the overlap fraction from the trace:
//            the share of the buckets' all-reduce time that ran before
//            backward finished computing (ddp::overlap_of_step, rank 0)
//   sweep    bucket caps 1, 5, 25, 100 MiB and one bucket per parameter
//   step     DDP alone with --bucket-mb, untraced: one line
//            "distlab_step_ms <median>" that bench/ddp_vs_pytorch.py reads
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>

#include "bench_registry.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp/naive_data_parallel.hpp"
#include "ddp/overlap.hpp"
#include "step_bench.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {
namespace {

struct DdpBenchOptions : StepOptions {
  comm::JobOptions job;
  std::vector<std::string> parts{"overlap", "sweep"};
  bool no_overlap = false;  // --parts step: every bucket after the backward (DdpOptions::overlap false)
  bool through_buffers = false;  // --parts step: never in place (DdpOptions::in_place false)
};

// One model and what a step of it needs.
struct Replica {
  torch::nn::Sequential model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  at::Tensor x;
  explicit Replica(const DdpBenchOptions& o)
      : model(make_model(o)), optimizer(make_optimizer(o.optimizer)(model->parameters())), x(make_input(o)) {}
  // Forward and backward; `sync` between backward and the optimizer step.
  void step(ddp::DistributedDataParallel* ddp, const std::function<void()>& sync = {}) {
    compat::zero_grad(*optimizer);
    at::Tensor loss = ddp != nullptr ? ddp->forward([&] { return loss_of(model->forward(x)); })
                                     : loss_of(model->forward(x));
    loss.backward();
    if (sync) sync();
    optimizer->step();
  }
};

ddp::DdpOptions options_with_cap(const StepOptions& o, int64_t cap_bytes) {
  ddp::DdpOptions options;
  options.bucket_cap_bytes = cap_bytes;
  options.gradient_as_bucket_view = o.bucket_view;
  return options;
}

// Rank 0's overlap over the synced steps [first, first + n) of the DDP
// whose events are in `sink`.
ddp::OverlapStats overlap_of(const trace::MemorySink& sink, int rank, int64_t first, int n) {
  ddp::OverlapStats sum;
  const auto events = sink.events();
  for (int64_t s = first; s < first + n; ++s) {
    const auto one = ddp::overlap_of_step(events, rank, s);
    sum.buckets = one.buckets;
    sum.all_reduce_us += one.all_reduce_us;
    sum.hidden_us += one.hidden_us;
    sum.exposed_us += one.exposed_us;
  }
  return sum;
}

void part_overlap(comm::Communicator& comm, const DdpBenchOptions& o, const std::shared_ptr<trace::MemorySink>& sink) {
  const bool me0 = comm.rank() == 0;
  Replica bucketed(o), naive(o);
  ddp::DistributedDataParallel ddp(comm, bucketed.model.ptr(),
                                   options_with_cap(o, o.bucket_cap_bytes()));
  ddp::broadcast_parameters(comm, *naive.model);
  double naive_comm_s = 0;  // the naive version's all-reduces, timed on this rank
  auto naive_sync = [&] {
    const auto start = std::chrono::steady_clock::now();
    ddp::average_gradients(comm, *naive.model);
    naive_comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int k = 0; k < o.warmup; ++k) {
    bucketed.step(&ddp);
    naive.step(nullptr, naive_sync);
  }
  std::vector<double> t_ddp, t_naive, t_local;
  ddp::OverlapStats overlap;
  naive_comm_s = 0;
  for (int r = 0; r < o.rounds; ++r) {
    if (sink) sink->clear();
    const int64_t first = ddp.stats().synced_steps;
    t_ddp.push_back(seconds_per_step(comm, o.iters, [&] { bucketed.step(&ddp); }));
    if (sink) {
      const auto one = overlap_of(*sink, comm.world_rank(), first, o.iters);
      overlap.buckets = one.buckets;
      overlap.all_reduce_us += one.all_reduce_us;
      overlap.hidden_us += one.hidden_us;
      overlap.exposed_us += one.exposed_us;
    }
    t_naive.push_back(seconds_per_step(comm, o.iters, [&] { naive.step(nullptr, naive_sync); }));
    t_local.push_back(seconds_per_step(comm, o.iters, [&] { naive.step(nullptr); }));
  }
  if (!me0) return;
  const double steps = static_cast<double>(o.rounds) * o.iters;
  const double d = median(t_ddp), n = median(t_naive), l = median(t_local);
  const double all_reduce_ms = overlap.all_reduce_us / steps / 1e3, hidden_ms = overlap.hidden_us / steps / 1e3;
  std::printf("# part overlap: DDP (%g MiB buckets, %d of them) against the naive version; medians of %d rounds\n",
              o.bucket_mb, overlap.buckets, o.rounds);
  std::printf("%-28s %10s %12s\n", "variant", "step_ms", "vs_naive");
  std::printf("%-28s %10.1f %12.3f\n", "ddp (overlapped)", d * 1e3, d / n);
  std::printf("%-28s %10.1f %12.3f\n", "naive (after backward)", n * 1e3, 1.0);
  std::printf("%-28s %10.1f %12.3f\n", "no communication", l * 1e3, l / n);
  std::printf("# naive: all-reduce after backward %.1f ms/step (rank 0); compute alone %.1f ms/step\n",
              naive_comm_s / steps * 1e3, l * 1e3);
  std::printf("# ddp, rank 0, from the trace: all-reduce %.1f ms/step, hidden behind backward %.1f ms/step, "
              "overlap fraction %.2f, exposed %.1f ms/step\n",
              all_reduce_ms, hidden_ms, overlap.fraction(), overlap.exposed_us / steps / 1e3);
  std::printf("# target never slower than naive: %s (ratio %.3f); at least half of the all-reduce hidden: %s (%.2f)\n",
              d <= n ? "met" : "NOT met", d / n, overlap.fraction() >= 0.5 ? "met" : "NOT met", overlap.fraction());
}

void part_sweep(comm::Communicator& comm, const DdpBenchOptions& o, const std::shared_ptr<trace::MemorySink>& sink) {
  const bool me0 = comm.rank() == 0;
  const std::vector<std::pair<std::string, int64_t>> caps = {{"1M", ddp::kMiB},
                                                             {"5M", 5 * ddp::kMiB},
                                                             {"25M", 25 * ddp::kMiB},
                                                             {"100M", 100 * ddp::kMiB},
                                                             {"per-param", 0}};
  Replica replica(o);
  std::vector<std::vector<double>> times(caps.size());
  std::vector<ddp::OverlapStats> overlaps(caps.size());
  std::vector<int> buckets(caps.size());
  // One DDP at a time on the model (each registers its hooks); the caps
  // take turns in every round.
  for (int r = 0; r < o.rounds; ++r)
    for (size_t c = 0; c < caps.size(); ++c) {
      ddp::DistributedDataParallel ddp(comm, replica.model.ptr(), options_with_cap(o, caps[c].second));
      for (int k = 0; k < std::max(2, o.warmup); ++k) replica.step(&ddp);  // the first step and the rebuild
      buckets[c] = static_cast<int>(ddp.bucket_plan().buckets.size());
      if (sink) sink->clear();
      const int64_t first = ddp.stats().synced_steps;
      times[c].push_back(seconds_per_step(comm, o.iters, [&] { replica.step(&ddp); }));
      if (sink) {
        const auto one = overlap_of(*sink, comm.world_rank(), first, o.iters);
        overlaps[c].all_reduce_us += one.all_reduce_us;
        overlaps[c].hidden_us += one.hidden_us;
        overlaps[c].exposed_us += one.exposed_us;
      }
    }
  if (!me0) return;
  const double steps = static_cast<double>(o.rounds) * o.iters;
  std::printf("# part sweep: bucket cap (first bucket 1 MiB); medians of %d rounds; all-reduce, hidden, exposed: "
              "rank 0's ms per step\n",
              o.rounds);
  std::printf("%-10s %8s %10s %12s %10s %9s %10s\n", "cap", "buckets", "step_ms", "all_reduce", "hidden", "overlap",
              "exposed");
  for (size_t c = 0; c < caps.size(); ++c)
    std::printf("%-10s %8d %10.1f %12.1f %10.1f %9.2f %10.1f\n", caps[c].first.c_str(), buckets[c],
                median(times[c]) * 1e3, overlaps[c].all_reduce_us / steps / 1e3, overlaps[c].hidden_us / steps / 1e3,
                overlaps[c].fraction(), overlaps[c].exposed_us / steps / 1e3);
}

void part_step(comm::Communicator& comm, const DdpBenchOptions& o) {
  Replica replica(o);
  ddp::DdpOptions options = options_with_cap(o, o.bucket_cap_bytes());
  options.overlap = !o.no_overlap;
  options.in_place = !o.through_buffers;
  ddp::DistributedDataParallel ddp(comm, replica.model.ptr(), options);
  for (int k = 0; k < o.warmup; ++k) replica.step(&ddp);
  std::vector<double> t;
  for (int r = 0; r < o.rounds; ++r) t.push_back(seconds_per_step(comm, o.iters, [&] { replica.step(&ddp); }));
  if (comm.rank() == 0) {
    std::printf("# rounds (ms/step):");
    for (double v : t) std::printf(" %.1f", v * 1e3);
    std::printf("\ndistlab_step_ms %.3f\n", median(t) * 1e3);
  }
}

void run_rank(comm::Communicator& comm, const DdpBenchOptions& o) {
  const int threads = share_cores(o.threads);
  const auto want = [&](const char* part) { return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end(); };
  const bool traced = want("overlap") || want("sweep");
  // The overlap is read from the trace in memory: one sink per process
  // (thread ranks share a recorder, so only rank 0 adds it).
  std::shared_ptr<trace::MemorySink> sink;
  if (traced && comm.rank() == 0) {
    sink = std::make_shared<trace::MemorySink>();
    comm.recorder_ptr()->add_sink(sink);
  }
  comm.barrier();
  if (comm.rank() == 0) {
    const int64_t params = o.parameters();
    std::printf("# ddp: %s backend, %d ranks, %d intra-op thread(s) each; %d x Linear(%d)+ReLU = %lld parameters "
                "(%.1f MB of gradients); %d rows per rank; optimizer %s; -n %d -w %d --rounds %d\n",
                comm.backend().c_str(), comm.size(), threads, o.layers, o.width, static_cast<long long>(params),
                params * 4 / 1e6, o.rows, o.optimizer.c_str(), o.iters, o.warmup, o.rounds);
    std::fflush(stdout);
  }
  if (want("step")) part_step(comm, o);
  if (want("overlap")) part_overlap(comm, o, sink);
  if (want("sweep")) part_sweep(comm, o, sink);
  std::fflush(stdout);
}

Registration reg("ddp", "DistributedDataParallel: overlapped vs naive, overlap fraction, bucket-size sweep",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<DdpBenchOptions>();
  comm::add_job_flags(cmd, o->job);
  add_step_flags(cmd, *o);
  cmd.add_option("--parts", o->parts, "overlap, sweep, step")
      ->check(CLI::IsMember({"overlap", "sweep", "step"}))->capture_default_str();
  cmd.add_flag("--no-overlap", o->no_overlap,
               "--parts step: every bucket all-reduces once the backward is done (DdpOptions::overlap false)");
  cmd.add_flag("--through-buffers", o->through_buffers,
               "--parts step: every bucket goes through its buffer, even where the backend could all-reduce the "
               "gradients where they lie (DdpOptions::in_place false)");
  return [o] {
    comm::run_job(comm::with_env_defaults(o->job), [&](comm::Communicator& comm) { run_rank(comm, *o); });
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
