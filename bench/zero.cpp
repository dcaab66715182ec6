// distlab-bench zero: ZeRO-1, ZeRO-2 and ZeRO-3 against DDP on the same
// model, data and buckets, timed side by side, and what each rank holds.
//
//   distlab-run --nproc-per-node 2 -- distlab-bench zero --backend gloo
//   distlab-run --nproc-per-node 4 -- distlab-bench zero --backend gloo --quick
//   /usr/bin/python3 bench/ddp_vs_pytorch.py --zero    (ZeRO-1 against PyTorch's ZeroRedundancyOptimizer)
//
// The model, data, options and timing are step_bench.hpp's (at the defaults
// 25.2 M parameters; here Adam, so that there is optimizer state to shard).
// Each variant steps its own copy of the model, from the same weights, on
// the same input, with the same bucket cap:
//   DDP                  DistributedDataParallel; the optimizer on every parameter
//   ZeRO-1               reduce-scatter after backward, step 1/p, all-gather
//   ZeRO-2               reduce-scatter while backward runs, .grad released
//   ZeRO-3               one unit per Linear, the next unit's all-gather prefetched
//   ZeRO-3 no prefetch   each unit gathered when it is needed
// ZeRO's collectives are the library's ring (ZeroOptions' default), DDP's
// all-reduce gloo's own.
//
// Parts (--parts):
//   compare  the variants take turns in --rounds rounds, the order rotating
//            by one each round, so that load from other work falls on all
//            alike; per variant the median step, the fastest and slowest
//            round, and the median of its per-round ratios to DDP's step in
//            the same round
//   memory   after a step, the bytes each rank holds by category (measured:
//            zero/memory.hpp) against the ZeRO paper's (zero::accounting);
//            and DDP's bucket buffers, which the paper does not count
//   step     ZeRO-1 alone: one line "distlab_step_ms <median>" that
//            bench/ddp_vs_pytorch.py --zero reads
// Targets are printed beside the numbers; none fails the run.
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <type_traits>

#include "bench_registry.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "step_bench.hpp"
#include "zero/memory.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

namespace distlab::bench {
namespace {

struct ZeroBenchOptions : StepOptions {
  comm::JobOptions job;
  bool quick = false;
  std::vector<std::string> parts{"compare", "memory"};
  ZeroBenchOptions() { optimizer = "adam"; }
};

// A copy of `base` (its weights, rank 0's once DDP or ZeRO broadcast them).
torch::nn::Sequential copy_of(const torch::nn::Sequential& base, const StepOptions& o) {
  auto model = make_model(o);
  torch::NoGradGuard no_grad;
  const auto from = base->parameters();
  const auto to = model->parameters();
  for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
  return model;
}

// One way of training the model: a step, and what the rank holds.
struct Variant {
  std::string name;
  zero::Stage stage;
  std::function<void()> step;
  std::function<zero::MemoryUse()> memory;
};

// The model is declared before what wraps it, so it outlives its wrapper.
struct DdpRun {
  torch::nn::Sequential model;
  ddp::DistributedDataParallel ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  DdpRun(comm::Communicator& comm, const torch::nn::Sequential& base, const StepOptions& o)
      : model(copy_of(base, o)),
        ddp(comm, model.ptr(), [&] {
          ddp::DdpOptions options;
          options.bucket_cap_bytes = o.bucket_cap_bytes();
          options.gradient_as_bucket_view = o.bucket_view;
          return options;
        }()),
        optimizer(make_optimizer(o.optimizer)(model->parameters())) {}
};

template <typename Zero>
struct ZeroRun {
  torch::nn::Sequential model;
  Zero zero;
  template <typename Options>
  ZeroRun(comm::Communicator& comm, const torch::nn::Sequential& base, const StepOptions& o, Options options)
      : model(copy_of(base, o)), zero(comm, model_arg(model), make_optimizer(o.optimizer), options) {}
  // Zero1 and Zero2 take the module, Zero3 the Sequential itself.
  static auto& model_arg(torch::nn::Sequential& m) {
    if constexpr (std::is_same_v<Zero, zero::Zero3>) return m; else return *m;
  }
};

zero::ZeroOptions zero_options(const StepOptions& o) {
  zero::ZeroOptions options;
  options.bucket_cap_bytes = o.bucket_cap_bytes();
  return options;
}

Variant ddp_variant(comm::Communicator& comm, const torch::nn::Sequential& base, const StepOptions& o,
                    const at::Tensor& x) {
  auto r = std::make_shared<DdpRun>(comm, base, o);
  return {"DDP", zero::Stage::kDdp,
          [r, x] {
            compat::zero_grad(*r->optimizer);
            r->ddp.forward([&] { return loss_of(r->model->forward(x)); }).backward();
            r->optimizer->step();
          },
          [r] {
            const std::vector<at::Tensor> params = r->model->parameters();
            zero::MemoryUse m = zero::measure_memory(params, r->optimizer.get());
            // The buckets the all-reduces run on, where they are not the .grads themselves.
            zero::StorageCounter counted;
            for (const at::Tensor& t : params) {
              counted.add(t);
              counted.add(t.grad());
            }
            for (const at::Tensor& b : r->ddp.reducer().bucket_buffers()) m.buffers += counted.add(b);
            return m;
          }};
}

template <typename Zero>
Variant zero_variant(std::string name, zero::Stage stage, const std::shared_ptr<ZeroRun<Zero>>& r,
                     const at::Tensor& x) {
  return {std::move(name), stage,
          [r, x] {
            r->zero.zero_grad();
            if constexpr (std::is_same_v<Zero, zero::Zero3>) loss_of(r->zero.forward(x)).backward();
            else loss_of(r->model->forward(x)).backward();
            r->zero.step();
          },
          [r] { return r->zero.sharded().memory(); }};
}

std::vector<Variant> make_variants(comm::Communicator& comm, const StepOptions& o, const at::Tensor& x) {
  const auto base = make_model(o);
  zero::Zero3Options prefetch, no_prefetch;
  no_prefetch.prefetch = false;
  using zero::Stage;
  return {ddp_variant(comm, base, o, x),
          zero_variant("ZeRO-1", Stage::kZero1, std::make_shared<ZeroRun<zero::Zero1>>(comm, base, o, zero_options(o)),
                       x),
          zero_variant("ZeRO-2", Stage::kZero2, std::make_shared<ZeroRun<zero::Zero2>>(comm, base, o, zero_options(o)),
                       x),
          zero_variant("ZeRO-3", Stage::kZero3, std::make_shared<ZeroRun<zero::Zero3>>(comm, base, o, prefetch), x),
          zero_variant("ZeRO-3 no prefetch", Stage::kZero3,
                       std::make_shared<ZeroRun<zero::Zero3>>(comm, base, o, no_prefetch), x)};
}

const char* verdict(bool met) { return met ? "met" : "NOT met"; }

void part_compare(comm::Communicator& comm, const StepOptions& o, std::vector<Variant>& variants) {
  const size_t n = variants.size();
  std::vector<std::vector<double>> times(n);
  for (int r = 0; r < o.rounds; ++r)
    for (size_t k = 0; k < n; ++k) {
      const size_t v = (k + static_cast<size_t>(r)) % n;  // round r starts with variant r
      times[v].push_back(seconds_per_step(comm, o.iters, variants[v].step));
    }
  if (comm.rank() != 0) return;
  // Each round's ratio to DDP's (variant 0) time in the same round.
  std::vector<Spread> step(n), vs_ddp(n);
  for (size_t v = 0; v < n; ++v) {
    step[v] = spread_of(times[v]);
    std::vector<double> ratios;
    for (size_t r = 0; r < times[v].size(); ++r) ratios.push_back(times[v][r] / times[0][r]);
    vs_ddp[v] = spread_of(ratios);
  }
  std::printf("# part compare: %d rounds of %d steps, the order rotating; step_ms: the median round, min and max "
              "the fastest and slowest; vs_ddp: the median of the rounds' ratios to DDP, and their range\n",
              o.rounds, o.iters);
  std::printf("%-20s %10s %10s %10s %8s %16s\n", "variant", "step_ms", "min_ms", "max_ms", "vs_ddp", "vs_ddp_range");
  for (size_t v = 0; v < n; ++v)
    std::printf("%-20s %10.1f %10.1f %10.1f %8.3f %7.3f-%-8.3f\n", variants[v].name.c_str(), step[v].median * 1e3,
                step[v].low * 1e3, step[v].high * 1e3, vs_ddp[v].median, vs_ddp[v].low, vs_ddp[v].high);
  // ZeRO-3 with prefetch against without, round by round.
  std::vector<double> prefetch_gain;
  for (size_t r = 0; r < times[3].size(); ++r) prefetch_gain.push_back(times[3][r] / times[4][r]);
  const Spread gain = spread_of(prefetch_gain);
  std::printf("# ZeRO-3 / ZeRO-3 no prefetch, per round: median %.3f (%.3f-%.3f)\n", gain.median, gain.low, gain.high);
  std::printf("# target ZeRO-1 <= 1.1x DDP: %s (%.3f); ZeRO-2 <= 1.1x DDP: %s (%.3f); ZeRO-3 <= 1.35x DDP: %s "
              "(%.3f); ZeRO-3 faster with prefetch: %s (%.3f)\n",
              verdict(vs_ddp[1].median <= 1.1), vs_ddp[1].median, verdict(vs_ddp[2].median <= 1.1), vs_ddp[2].median,
              verdict(vs_ddp[3].median <= 1.35), vs_ddp[3].median, verdict(gain.median < 1), gain.median);
}

// (measured - accounting) / accounting in percent; 0 when both are 0.
double percent_off(int64_t measured, int64_t accounted) {
  if (accounted == 0) return measured == 0 ? 0.0 : INFINITY;
  return 100.0 * static_cast<double>(measured - accounted) / static_cast<double>(accounted);
}

void part_memory(comm::Communicator& comm, const StepOptions& o, std::vector<Variant>& variants) {
  struct Category {
    const char* name;
    int64_t zero::MemoryUse::*bytes;
  };
  const Category categories[] = {{"parameters", &zero::MemoryUse::parameters},
                                 {"gradients", &zero::MemoryUse::gradients},
                                 {"optimizer state", &zero::MemoryUse::optimizer_state}};
  const int64_t psi = o.parameters(), state_bytes = optimizer_state_bytes(o.optimizer);
  // Every rank's |percent off| per (variant, category); the largest over ranks goes to rank 0.
  std::vector<zero::MemoryUse> measured, accounted;
  at::Tensor worst = at::zeros({static_cast<int64_t>(variants.size() * 3)}, at::kDouble);
  for (size_t v = 0; v < variants.size(); ++v) {
    measured.push_back(variants[v].memory());
    accounted.push_back(zero::accounting(variants[v].stage, psi, comm.size(), 4, state_bytes));
    for (size_t c = 0; c < 3; ++c)
      worst[static_cast<int64_t>(v * 3 + c)] =
          std::abs(percent_off(measured[v].*categories[c].bytes, accounted[v].*categories[c].bytes));
  }
  comm.native_all_reduce(worst, comm::ReduceOp::kMax);
  if (comm.rank() != 0) return;
  std::printf("# part memory: bytes held after a step, by category; measured (zero/memory.hpp: each storage once) "
              "against the ZeRO paper's accounting for Psi = %lld, p = %d, %s (%lld bytes of state per parameter); "
              "rank 0's, and the largest |off| over ranks\n",
              static_cast<long long>(psi), comm.size(), o.optimizer.c_str(), static_cast<long long>(state_bytes));
  std::printf("%-20s %-16s %12s %14s %9s %12s\n", "variant", "category", "measured_MB", "accounting_MB", "off_%",
              "worst_off_%");
  std::vector<bool> within(variants.size(), true);
  for (size_t v = 0; v < variants.size(); ++v)
    for (size_t c = 0; c < 3; ++c) {
      const double w = worst[static_cast<int64_t>(v * 3 + c)].item<double>();
      within[v] = within[v] && w <= 5.0;
      std::printf("%-20s %-16s %12.2f %14.2f %+9.2f %12.2f\n", variants[v].name.c_str(), categories[c].name,
                  measured[v].*categories[c].bytes / 1e6, accounted[v].*categories[c].bytes / 1e6,
                  percent_off(measured[v].*categories[c].bytes, accounted[v].*categories[c].bytes), w);
    }
  // Buffers are not in the accounting: DDP's buckets stay, ZeRO-2's buckets and ZeRO-3's unit
  // gradients come and go (their most at once since the variant was built); rank 0's.
  for (size_t v = 0; v < variants.size(); ++v)
    std::printf("%-20s %-16s %12.2f %14s   (%s)\n", variants[v].name.c_str(), "buffers", measured[v].buffers / 1e6,
                "-", v == 0 ? "the buckets" : "the most at once during a step");
  std::printf("# target every category within 5 %% of the accounting:");
  for (size_t v = 0; v < variants.size(); ++v) std::printf(" %s %s;", variants[v].name.c_str(), verdict(within[v]));
  std::printf("\n");
}

void part_step(comm::Communicator& comm, const StepOptions& o, const at::Tensor& x) {
  const auto base = make_model(o);
  auto zero1 = zero_variant("ZeRO-1", zero::Stage::kZero1,
                            std::make_shared<ZeroRun<zero::Zero1>>(comm, base, o, zero_options(o)), x);
  for (int k = 0; k < o.warmup; ++k) zero1.step();
  std::vector<double> t;
  for (int r = 0; r < o.rounds; ++r) t.push_back(seconds_per_step(comm, o.iters, zero1.step));
  if (comm.rank() == 0) {
    std::printf("# rounds (ms/step):");
    for (double v : t) std::printf(" %.1f", v * 1e3);
    std::printf("\ndistlab_step_ms %.3f\n", median(t) * 1e3);
  }
}

void run_rank(comm::Communicator& comm, const ZeroBenchOptions& o) {
  // Whole lines: under distlab-run, another rank's stderr may land between two writes of rank 0's tables.
  if (comm.rank() == 0) std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int threads = share_cores(o.threads);
  const auto want = [&](const char* part) { return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end(); };
  const at::Tensor x = make_input(o);
  if (comm.rank() == 0) {
    const int64_t params = o.parameters();
    std::printf("# zero: %s backend, %d ranks, %d intra-op thread(s) each; %d x Linear(%d)+ReLU = %lld parameters "
                "(%.1f MB); %d rows per rank; optimizer %s; bucket cap %g MiB%s; -n %d -w %d --rounds %d%s\n",
                comm.backend().c_str(), comm.size(), threads, o.layers, o.width, static_cast<long long>(params),
                params * 4 / 1e6, o.rows, o.optimizer.c_str(), o.bucket_mb, o.bucket_view ? " (DDP: bucket view)" : "",
                o.iters, o.warmup, o.rounds, o.quick ? " (--quick)" : "");
    std::fflush(stdout);
  }
  if (want("step")) part_step(comm, o, x);
  if (want("compare") || want("memory")) {
    auto variants = make_variants(comm, o, x);
    for (int k = 0; k < std::max(1, o.warmup); ++k)  // DDP's first step and its bucket rebuild; ZeRO's state
      for (auto& v : variants) v.step();
    if (want("compare")) part_compare(comm, o, variants);
    if (want("memory")) part_memory(comm, o, variants);
  }
  std::fflush(stdout);
}

Registration reg("zero", "ZeRO-1, ZeRO-2, ZeRO-3 (with and without prefetch) against DDP: step time and memory",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<ZeroBenchOptions>();
  comm::add_job_flags(cmd, o->job);
  add_step_flags(cmd, *o);
  cmd.add_flag("--quick", o->quick,
               "a run of seconds: 4 x Linear(256), 8 rows, -n 1 -w 1 --rounds 2 (over the flags above)");
  cmd.add_option("--parts", o->parts, "compare, memory, step")
      ->check(CLI::IsMember({"compare", "memory", "step"}))->capture_default_str();
  return [o] {
    if (o->quick) {
      o->width = 256;
      o->layers = 4;
      o->rows = 8;
      o->iters = 1;
      o->warmup = 1;
      o->rounds = 2;
    }
    comm::run_job(comm::with_env_defaults(o->job), [&](comm::Communicator& comm) { run_rank(comm, *o); });
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
