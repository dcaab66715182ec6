// distlab-bench experts: what expert parallelism costs, dropless against
// capacities, side by side in one run.
//
//   distlab-bench experts --backend threads --ranks 4
//   distlab-run --nproc-per-node 4 -- distlab-bench experts --backend gloo
//
// One mixture-of-experts layer (E = experts-per-rank x the world's ranks,
// top-k), forward and backward, the experts spread over every rank of the
// world (experts::moe_parallel), each rank routing its own tokens. Rank 0
// prints, per capacity factor:
//
//   ms          the median of -n steps (after -w), the slowest rank's
//   naive ms    the same layer with every expert on every rank
//               (experts::moe_local, no exchange): what the exchanges and
//               the spread cost
//   dropped     the assignments dropped over all ranks, of T k G
//   sent        the bytes rank 0 sent in one step, from the trace
//   formula     (G-1) E/G int64 counts + 2 (out + back) d float32: each row
//               to another rank goes out and back, forward and backward
//   dispatch    the forward's dispatch, timed apart (experts::MoeStats): the
//               plan, the rows sorted by expert, the counts' all-to-all and
//               the rows' all-to-all-v; the median, the slowest rank's
//   combine     the forward's combine: the rows' way back and the weighted sum
//   model       beside each, the cost model's price of its exchanges (every
//               rank's counts, pairwise all-to-all-v plans; the counts'
//               all-to-all with dispatch) on the link collectives::calibrate
//               measured. The backward runs the same exchanges reversed.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "collectives/calibrate.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/plan.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "experts/moe.hpp"
#include "ranks.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {
namespace {

struct ExpertsBenchOptions {
  comm::JobOptions job;
  int64_t experts_per_rank = 2, top_k = 2, tokens = 1024, model = 256, hidden = 512;
  int iters = 5, warmup = 2;
};

at::Tensor seeded(at::IntArrayRef shape, uint64_t seed) { return at::randn(shape, at::detail::createCPUGenerator(seed)); }

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Every rank's rows per peer (send_rows) as one G x G matrix of elements, on every rank.
std::vector<int64_t> all_counts(comm::Communicator& world, const std::vector<int64_t>& rows, int64_t width) {
  const int G = world.size();
  at::Tensor all = at::zeros({G, G}, at::kLong);
  for (int d = 0; d < G; ++d) all[world.rank()][d] = rows[static_cast<size_t>(d)] * width;
  world.native_all_reduce(all, comm::ReduceOp::kSum);
  const at::Tensor flat = all.contiguous().view({-1});
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

std::vector<int64_t> transposed(const std::vector<int64_t>& counts, int G) {
  std::vector<int64_t> out(counts.size());
  for (int s = 0; s < G; ++s)
    for (int d = 0; d < G; ++d) out[static_cast<size_t>(d * G + s)] = counts[static_cast<size_t>(s * G + d)];
  return out;
}

void run_rank(comm::Communicator& world, const ExpertsBenchOptions& o) {
  const int G = world.size(), me = world.rank();
  const int64_t E = o.experts_per_rank * G;
  auto events = std::make_shared<trace::MemorySink>();
  if (world.backend() != "threads" || me == 0) world.recorder_ptr()->add_sink(events);  // threads share one
  world.barrier();
  const collectives::LinkParams link = collectives::calibrate(world);
  const experts::ExpertMlps whole(seeded({E, o.model, o.hidden}, 2) * 0.05, seeded({E, o.hidden}, 3) * 0.1,
                                  seeded({E, o.hidden, o.model}, 4) * 0.05, seeded({E, o.model}, 5) * 0.1);
  experts::ExpertMlps mine(whole->slice(me * o.experts_per_rank, o.experts_per_rank));
  experts::ExpertMlps all(whole->slice(0, E));
  const at::Tensor gate = seeded({E, o.model}, 1) * 0.1;
  const at::Tensor x_in = seeded({o.tokens, o.model}, 100 + static_cast<uint64_t>(me));
  if (me == 0) {
    std::printf("distlab-bench experts: %lld experts (%lld per rank), top-%lld, %lld tokens per rank, d %lld, "
                "hidden %lld, over %s; link alpha %.1f us, %.2f GB/s\n",
                static_cast<long long>(E), static_cast<long long>(o.experts_per_rank), static_cast<long long>(o.top_k),
                static_cast<long long>(o.tokens), static_cast<long long>(o.model), static_cast<long long>(o.hidden),
                comm::backend_ranks(G, world.backend()).c_str(), link.alpha_s * 1e6,
                link.beta_s_per_byte > 0 ? 1e-9 / link.beta_s_per_byte : 0.0);
    std::printf("%-13s %9s %9s %9s %7s %9s %7s %13s %11s %11s\n", "capacity", "ms", "naive ms", "dispatch", "model",
                "combine", "model", "dropped", "sent", "formula");
  }
  for (double cf : {0.0, 1.0, 1.25}) {
    experts::MoeOptions m;
    m.experts = E, m.top_k = o.top_k, m.capacity_factor = cf;
    // One step of the layer: forward, then backward of sum(out) (x an activation: its gradient too).
    auto step = [&](bool parallel, experts::MoeStats* stats) {
      const at::Tensor x = x_in.clone().requires_grad_(true), g = gate.clone().requires_grad_(true);
      const experts::Routing r = experts::route(at::linear(x, g), m.top_k);
      const at::Tensor out = parallel ? experts::moe_parallel(world, x, r, *mine, m, stats)
                                      : experts::moe_local(x, r, *all, m, stats);
      out.sum().backward();
    };
    std::vector<double> ms, naive_ms, dispatch_ms, combine_ms;
    experts::MoeStats stats;
    int64_t sent = 0;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      world.barrier();
      const int64_t from = trace::now_us();
      auto start = std::chrono::steady_clock::now();
      step(true, &stats);
      if (i >= o.warmup) {
        ms.push_back(milliseconds_since(start));
        dispatch_ms.push_back(stats.dispatch_s * 1e3);
        combine_ms.push_back(stats.combine_s * 1e3);
      }
      world.barrier();
      if (i == 0) sent = messages_sent(*events, world.world_rank(), from, trace::now_us());
      start = std::chrono::steady_clock::now();
      step(false, nullptr);
      if (i >= o.warmup) naive_ms.push_back(milliseconds_since(start));
      events->clear();
      world.barrier();
    }
    const std::vector<double> per_rank = gathered(world, median(ms)), naive = gathered(world, median(naive_ms));
    const std::vector<double> dispatching = gathered(world, median(dispatch_ms)),
                              combining = gathered(world, median(combine_ms));
    const std::vector<double> drops_per_rank =
        gathered(world, double(std::accumulate(stats.dropped.begin(), stats.dropped.end(), int64_t{0})));
    const auto dropped = static_cast<int64_t>(std::accumulate(drops_per_rank.begin(), drops_per_rank.end(), 0.0));
    // The cost model: the forward's exchange, its way back, and both again in the backward.
    const std::vector<int64_t> out_counts = all_counts(world, stats.sent_rows, o.model);
    const double one_way = collectives::predict(collectives::make_all_to_all_plan(out_counts, G), link).total_seconds;
    const double way_back =
        collectives::predict(collectives::make_all_to_all_plan(transposed(out_counts, G), G), link).total_seconds;
    const std::vector<int64_t> count_counts(static_cast<size_t>(G * G), o.experts_per_rank);
    const double counts_s =
        collectives::predict(collectives::make_all_to_all_plan(count_counts, G, 8), link).total_seconds;
    int64_t out_rows = 0, back_rows = 0;
    for (int d = 0; d < G; ++d)
      if (d != me) out_rows += stats.sent_rows[static_cast<size_t>(d)], back_rows += stats.received_rows[static_cast<size_t>(d)];
    const int64_t formula = (G - 1) * o.experts_per_rank * 8 + 2 * (out_rows + back_rows) * o.model * 4;
    if (me == 0) {
      char capacity[24], drops[32];
      std::snprintf(capacity, sizeof capacity, cf > 0 ? "factor %.2f" : "dropless", cf);
      std::snprintf(drops, sizeof drops, "%lld / %lld", static_cast<long long>(dropped),
                    static_cast<long long>(o.tokens * o.top_k * G));
      auto slowest = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
      std::printf("%-13s %9.2f %9.2f %9.3f %7.3f %9.3f %7.3f %13s %11s %11s\n", capacity, slowest(per_rank),
                  slowest(naive), slowest(dispatching), (counts_s + one_way) * 1e3, slowest(combining),
                  way_back * 1e3, drops, format_size(sent).c_str(), format_size(formula).c_str());
    }
    std::fflush(stdout);
  }
}

Registration reg("experts", "expert parallelism (a mixture-of-experts layer spread over the ranks): time against "
                            "every expert on every rank, drops, bytes beside the formula and the cost model, "
                            "dropless against capacities",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<ExpertsBenchOptions>();
  comm::add_job_flags(cmd, o->job);
  cmd.add_option("--experts-per-rank", o->experts_per_rank, "experts each rank holds (E = this x the ranks)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  cmd.add_option("--top-k", o->top_k, "experts per token")->check(CLI::Range(1, 64))->capture_default_str();
  cmd.add_option("--tokens", o->tokens, "tokens per rank")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd.add_option("--model", o->model, "model width d")->check(CLI::Range(1, 65536))->capture_default_str();
  cmd.add_option("--hidden", o->hidden, "each expert's hidden width")->check(CLI::Range(1, 65536))
      ->capture_default_str();
  add_repetition_flags(cmd, o->iters, o->warmup, "steps");
  return on_every_rank(o, run_rank);
});

}  // namespace
}  // namespace distlab::bench
