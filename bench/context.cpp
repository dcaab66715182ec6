// distlab-bench context: what context parallelism costs, per method, side
// by side in one run.
//
//   distlab-bench context --backend threads --ranks 4
//   distlab-run --nproc-per-node 4 -- distlab-bench context --backend gloo
//
// One causal attention forward of (B, H, S, D), the sequence split over
// every rank of the world, by the ring (contiguous and zigzag layouts),
// all-gather and Ulysses. Rank 0 prints, per method:
//
//   ms          the median of -n forwards (after -w), the slowest rank's
//   slow/fast   the slowest rank's median over the fastest's (the ring
//               moves at its slowest rank's pace: about 1 whatever the work)
//   compute     the ring only: the most compute time a rank spent over the
//               least (RingWork::compute_seconds, the waits left out): the
//               causal imbalance, measured
//   pairs       the most causal pairs a rank computes over the least, from
//               the ring plan (ring_plan.hpp): what the imbalance should be
//               (a diagonal piece costs a full one's time, half its pairs)
//   sent        the bytes rank 0 sent in one forward, from the trace
//   formula     the same from the formula (lesson 15's part 4)
//   comm ms     the cost model's price of that traffic on the link
//               collectives::calibrate measured (the ring's hops overlap
//               its compute; all-gather's and Ulysses' do not)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "ranks.hpp"
#include "collectives/calibrate.hpp"
#include "collectives/cost_model.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "context_parallel/gathered_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/ulysses.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {
namespace {

using context_parallel::Layout;

struct ContextBenchOptions {
  comm::JobOptions job;
  int64_t seq = 1024, batch = 1, heads = 8, head_dim = 64;
  int iters = 5, warmup = 2;
};

struct Method {
  std::string name;
  Layout layout;
};

void run_rank(comm::Communicator& world, const ContextBenchOptions& o) {
  const int C = world.size(), me = world.rank();
  if (o.seq % (2 * C) != 0)
    throw comm::SetupError("distlab-bench context: --seq " + std::to_string(o.seq) + " does not cut into 2C = " +
                           std::to_string(2 * C) + " chunks");
  auto events = std::make_shared<trace::MemorySink>();
  if (world.backend() != "threads" || me == 0) world.recorder_ptr()->add_sink(events);  // threads share one
  world.barrier();
  const collectives::LinkParams link = collectives::calibrate(world);
  const double scale = 1.0 / std::sqrt(static_cast<double>(o.head_dim));
  at::Generator g = at::detail::createCPUGenerator(15);
  const at::Tensor q = at::randn({o.batch, o.heads, o.seq, o.head_dim}, g);
  const at::Tensor k = at::randn({o.batch, o.heads, o.seq, o.head_dim}, g);
  const at::Tensor v = at::randn({o.batch, o.heads, o.seq, o.head_dim}, g);
  const double L = static_cast<double>(o.seq / C), n = static_cast<double>(o.batch * o.heads) * L * o.head_dim;
  if (me == 0) {
    std::printf("distlab-bench context: causal attention (B %lld, H %lld, S %lld, D %lld) over %s; "
                "link alpha %.1f us, %.2f GB/s\n",
                static_cast<long long>(o.batch), static_cast<long long>(o.heads), static_cast<long long>(o.seq),
                static_cast<long long>(o.head_dim), comm::backend_ranks(C, world.backend()).c_str(),
                link.alpha_s * 1e6, link.beta_s_per_byte > 0 ? 1e-9 / link.beta_s_per_byte : 0.0);
    std::printf("%-22s %9s %9s %8s %6s %11s %11s %9s\n", "method", "ms", "slow/fast", "compute", "pairs", "sent",
                "formula",
                "comm ms");
  }
  const std::vector<Method> methods = {{"ring contiguous", Layout::kContiguous},
                                       {"ring zigzag", Layout::kZigzag},
                                       {"all_gather zigzag", Layout::kZigzag},
                                       {"ulysses", Layout::kContiguous}};
  for (const Method& method : methods) {
    if (method.name == "ulysses" && o.heads % C != 0) {
      if (me == 0) std::printf("%-22s  (left out: %lld heads do not divide by %d)\n", method.name.c_str(),
                               static_cast<long long>(o.heads), C);
      continue;
    }
    const at::Tensor mine = context_parallel::positions_of(method.layout, o.seq, C, me);
    const at::Tensor qm = q.index_select(-2, mine), km = k.index_select(-2, mine), vm = v.index_select(-2, mine);
    std::vector<double> compute_ms;
    auto forward = [&] {
      if (method.name.rfind("ring", 0) == 0) {
        context_parallel::RingWork work;
        auto out = context_parallel::ring_attention(world, qm, km, vm, scale, mine, true, 0, &work);
        double total = 0;
        for (double seconds : work.compute_seconds) total += seconds * 1e3;
        compute_ms.push_back(total);
        return out;
      }
      if (method.name.rfind("all_gather", 0) == 0)
        return context_parallel::all_gather_attention(world, qm, km, vm, scale, mine, true);
      return context_parallel::ulysses_attention(world, qm, km, vm, scale, mine, true);
    };
    std::vector<double> ms;
    int64_t sent = 0;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      world.barrier();
      const int64_t from = trace::now_us();
      const auto start = std::chrono::steady_clock::now();
      forward();
      const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      world.barrier();
      if (i == 0) sent = messages_sent(*events, world.world_rank(), from, trace::now_us());
      if (i >= o.warmup) ms.push_back(took);
      events->clear();
      world.barrier();
    }
    const std::vector<double> per_rank = gathered(world, median(ms));
    const double slowest = *std::max_element(per_rank.begin(), per_rank.end());
    const double fastest = *std::min_element(per_rank.begin(), per_rank.end());
    std::string compute = "-";
    if (!compute_ms.empty()) {
      const std::vector<double> busy = gathered(world, median(compute_ms));
      char text[16];
      std::snprintf(text, sizeof text, "%.2f",
                    *std::max_element(busy.begin(), busy.end()) / *std::min_element(busy.begin(), busy.end()));
      compute = text;
    }
    // Formula and cost-model price of the traffic (rank 0's, bytes per message).
    double formula = 0, comm_s = 0;
    const double hop = 2 * n * 4 + L * 8;
    if (method.name.rfind("ring", 0) == 0 || method.name.rfind("all_gather", 0) == 0) {
      formula = (C - 1) * hop;
      comm_s = (C - 1) * (link.alpha_s + hop * link.beta_s_per_byte);
    } else {
      const double a2a = (C - 1.0) / C * n * 4;
      formula = 4 * a2a + (C - 1.0) / C * n / o.head_dim * 4 + (C - 1) * L * 8;
      const auto plan = collectives::make_plan(collectives::Collective::kAllToAll, collectives::Algorithm::kPairwise,
                                               C, static_cast<int64_t>(n));
      comm_s = 4 * collectives::predict(plan, link).total_seconds;
    }
    std::string pairs = "-";
    if (method.name.rfind("ulysses", 0) != 0) {
      const auto plan = context_parallel::make_ring_plan(method.layout, C, o.seq, true);
      int64_t most = 0, least = std::numeric_limits<int64_t>::max();
      for (int r = 0; r < C; ++r) most = std::max(most, plan.pairs(r)), least = std::min(least, plan.pairs(r));
      char text[16];
      std::snprintf(text, sizeof text, "%.2f", static_cast<double>(most) / static_cast<double>(least));
      pairs = text;
    }
    if (me == 0)
      std::printf("%-22s %9.2f %9.2f %8s %6s %11s %11s %9.3f\n", method.name.c_str(), slowest, slowest / fastest,
                  compute.c_str(), pairs.c_str(), format_size(sent).c_str(), format_size(static_cast<int64_t>(formula)).c_str(),
                  comm_s * 1e3);
    std::fflush(stdout);
  }
}

Registration reg("context", "context parallelism (ring contiguous and zigzag, all-gather, Ulysses): time, imbalance "
                            "and bytes beside the formulas and the cost model",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<ContextBenchOptions>();
  comm::add_job_flags(cmd, o->job);
  cmd.add_option("--seq", o->seq, "sequence length S (a multiple of 2 x ranks)")->check(CLI::Range(2, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--batch", o->batch, "batch B")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd.add_option("--heads", o->heads, "heads H (Ulysses needs a multiple of the ranks)")->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd.add_option("--head-dim", o->head_dim, "width of a head D")->check(CLI::Range(1, 4096))->capture_default_str();
  add_repetition_flags(cmd, o->iters, o->warmup, "forwards");
  return on_every_rank(o, run_rank);
});

}  // namespace
}  // namespace distlab::bench
