// Lesson 16: expert parallelism (mixtures of experts).
//
// A mixture-of-experts feed-forward holds E small MLPs where a dense layer
// holds one; a router sends each token to k of them, so a token costs k
// experts' work whatever E is. Expert parallelism spreads the experts over
// the ranks of an expert group: each token travels to the rank of its
// expert and back, an all-to-all each way, with counts that change every
// step.
//
//   1. routing by hand: probabilities, the top-k, the capacity, the tokens
//      dropped, the balancing loss and the z-loss beside their formulas
//   2. the balancing loss at work: a router that favours one expert,
//      trained with and without it; tokens per expert and tokens dropped
//   3. expert parallelism: one model (E experts, whatever the ranks) on
//      groups of G ranks for every G that divides the ranks, outputs and
//      gradients equal to every expert on every rank
//   4. bytes per step from the trace beside the formula: the rows each rank
//      dispatches to other ranks' experts and returns from its own
//
//   lesson_16_expert_parallel --backend threads --ranks 4
//   distlab-run --nproc-per-node 2 -- lesson_16_expert_parallel --backend gloo
#include <CLI/CLI.hpp>
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lesson.hpp"
#include "over_ranks.hpp"
#include "replicas.hpp"
#include "wire.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "experts/moe.hpp"
#include "experts/trace_counts.hpp"
#include "trace/clock.hpp"

using namespace distlab;
using experts::ExpertMlps;
using experts::MoeOptions;
using experts::Routing;

namespace {

struct Options {
  comm::JobOptions job;
  int64_t experts = 8;  // E, the model's: the same whatever the ranks (they must divide it)
  int64_t top_k = 2;
  double capacity_factor = 1.0;  // 0: dropless (--dropless)
  int64_t tokens = 64;  // per rank
  int64_t model = 16, hidden = 32;
  int64_t steps = 60;  // part 2's training
  int threads = 0;
};

constexpr double kSame = 1e-5;  // the largest difference from every expert on every rank, x the values compared

at::Tensor seeded(at::IntArrayRef sizes, uint64_t seed) { return at::randn(sizes, at::detail::createCPUGenerator(seed)); }

double largest_value(const at::Tensor& a) { return a.detach().abs().max().item<double>(); }

double largest_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  const double d = (a.detach().cpu().to(at::kDouble) - b.detach().cpu().to(at::kDouble)).abs().max().item<double>();
  return std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
}

// E experts, the same on every rank (their own generators: thread ranks share the default one).
ExpertMlps whole_experts(int64_t E, const Options& o) {
  return ExpertMlps(seeded({E, o.model, o.hidden}, 2) / std::sqrt(double(o.model)), seeded({E, o.hidden}, 3) * 0.1,
                    seeded({E, o.hidden, o.model}, 4) / std::sqrt(double(o.hidden)), seeded({E, o.model}, 5) * 0.1);
}

// "capacity factor 1.25", or "dropless".
std::string capacity_text(double capacity_factor) {
  if (capacity_factor <= 0) return "dropless";
  char text[32];
  std::snprintf(text, sizeof text, "capacity factor %.2f", capacity_factor);
  return text;
}

std::string counts_text(const std::vector<int64_t>& counts) {
  std::string text;
  for (int64_t c : counts) text += (text.empty() ? "" : " ") + std::to_string(c);
  return text;
}

// ------------------------------------------------------------------ part 1

bool by_hand(comm::Communicator& world, const Options& o) {
  if (world.rank() != 0) return true;
  const int64_t T = 8, E = 4, k = o.top_k;
  const at::Tensor logits = seeded({T, E}, 7) * 1.5;
  const Routing r = experts::route(logits, k);
  const experts::DispatchPlan plan = experts::plan_dispatch(r.experts, E, o.capacity_factor);
  std::printf("\n1. Routing by hand: %lld tokens, %lld experts, top-%lld, %s\n"
              "  probs = softmax(x W_g) in float32; each token goes to its %lld likeliest experts, weighted\n"
              "  by their probabilities. ",
              static_cast<long long>(T), static_cast<long long>(E), static_cast<long long>(k),
              capacity_text(o.capacity_factor).c_str(), static_cast<long long>(k));
  if (plan.capacity > 0)
    std::printf("capacity = ceil(T k cf / E) = ceil(%lld x %lld x %.2f / %lld) = %lld\n",
                static_cast<long long>(T), static_cast<long long>(k), o.capacity_factor, static_cast<long long>(E),
                static_cast<long long>(plan.capacity));
  else
    std::printf("Dropless: every choice is kept.\n");
  std::printf("  token   p(e0)  p(e1)  p(e2)  p(e3)   choices (weight)\n");
  // Which (token, choice) slots the plan kept.
  std::vector<bool> kept(static_cast<size_t>(T * k), false);
  for (int64_t i = 0; i < plan.slots.numel(); ++i) kept[static_cast<size_t>(plan.slots[i].item<int64_t>())] = true;
  for (int64_t t = 0; t < T; ++t) {
    std::string choices;
    for (int64_t j = 0; j < k; ++j) {
      char text[48];
      std::snprintf(text, sizeof text, "  e%lld (%.2f)%s", static_cast<long long>(r.experts[t][j].item<int64_t>()),
                    r.weights[t][j].item<double>(), kept[static_cast<size_t>(t * k + j)] ? "" : " dropped");
      choices += text;
    }
    std::printf("  %5lld   %.2f   %.2f   %.2f   %.2f %s\n", static_cast<long long>(t), r.probs[t][0].item<double>(),
                r.probs[t][1].item<double>(), r.probs[t][2].item<double>(), r.probs[t][3].item<double>(),
                choices.c_str());
  }
  std::printf("  kept per expert %s, dropped %s (first choices before second ones, then token order)\n",
              counts_text(plan.kept).c_str(), counts_text(plan.dropped).c_str());
  // The balancing loss by hand: f_e (the share of assignments) and P_e (the mean probability).
  const at::Tensor f = experts::assignments_per_expert(r).to(at::kDouble) / double(T * k);
  const at::Tensor P = r.probs.mean(0).to(at::kDouble);
  double by_hand_loss = 0;
  std::string f_text, P_text;
  for (int64_t e = 0; e < E; ++e) {
    by_hand_loss += f[e].item<double>() * P[e].item<double>();
    char a[16], b[16];
    std::snprintf(a, sizeof a, "%.3f", f[e].item<double>());
    std::snprintf(b, sizeof b, "%.3f", P[e].item<double>());
    f_text += std::string(e ? " " : "") + a;
    P_text += std::string(e ? " " : "") + b;
  }
  by_hand_loss *= double(E);
  const double loss = experts::balancing_loss(r).item<double>();
  const double z = experts::z_loss(r.logits).item<double>();
  const double z_by_hand = at::logsumexp(logits.to(at::kDouble), -1).pow(2).mean().item<double>();
  std::printf("  balancing loss E sum_e f_e P_e: f = (%s), P = (%s)\n"
              "    by hand %.6f, experts::balancing_loss %.6f (1 when even, up to E when all on one)\n"
              "  z-loss mean(logsumexp(logits)^2): by hand %.6f, experts::z_loss %.6f\n",
              f_text.c_str(), P_text.c_str(), by_hand_loss, loss, z_by_hand, z);
  return std::abs(loss - by_hand_loss) < 1e-5 && std::abs(z - z_by_hand) < 1e-4;
}

// ------------------------------------------------------------------ part 2

// A router that favours expert 0 (the tokens share a direction its weight
// points along), trained with the balancing loss at `coefficient`: the
// tokens each expert took at the first and last step, and those dropped.
struct Trained {
  std::vector<int64_t> first, last;
  int64_t dropped_first = 0, dropped_last = 0;
};

constexpr double kBalancingCapacity = 1.0;  // part 2 drops what exceeds it, whatever --capacity-factor says

Trained train_router(const Options& o, double coefficient, trace::Recorder* recorder) {
  const int64_t E = 4, T = o.tokens, d = o.model;
  const at::Tensor lean = seeded({d}, 11);
  const at::Tensor x = seeded({T, d}, 12) + lean;  // every token leans the same way
  const at::Tensor target = at::tanh(at::matmul(x, seeded({d, d}, 13) / std::sqrt(double(d))));
  at::Tensor gate = (seeded({E, d}, 14) * 0.1).index_put_({0}, lean * 0.2).requires_grad_(true);
  ExpertMlps mlps = whole_experts(E, o);
  MoeOptions m;
  m.experts = E, m.top_k = 1, m.capacity_factor = kBalancingCapacity;
  Trained t;
  std::vector<at::Tensor> params = mlps->parameters();
  params.push_back(gate);
  for (int64_t step = 0; step < o.steps; ++step) {
    const Routing r = experts::route(at::linear(x, gate), m.top_k);
    experts::MoeStats stats;
    const at::Tensor out = experts::moe_local(x, r, *mlps, m, &stats);
    const at::Tensor loss = (out - target).pow(2).mean() + coefficient * experts::balancing_loss(r);
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    loss.backward();
    {
      at::NoGradGuard no_grad;
      for (auto& p : params) p.sub_(p.grad() * 0.5);
    }
    const int64_t dropped = std::accumulate(stats.dropped.begin(), stats.dropped.end(), int64_t{0});
    // Each step's loads on the trace: the Experts panel's histogram, step by step.
    experts::record_tokens_per_expert(recorder, 0, coefficient > 0 ? "balancing 0.1" : "balancing 0", stats);
    if (step == 0) t.first = stats.kept, t.dropped_first = dropped;
    t.last = stats.kept, t.dropped_last = dropped;
  }
  return t;
}

bool balancing(comm::Communicator& world, const Options& o) {
  if (world.rank() != 0) return true;
  std::printf("\n2. The balancing loss at work: %lld tokens, 4 experts, top-1, capacity factor %.2f\n"
              "  (capacity %lld); the router starts out favouring expert 0; %lld steps of SGD on\n"
              "  mse + coefficient x balancing loss. Tokens each expert kept, and the tokens dropped:\n",
              static_cast<long long>(o.tokens), kBalancingCapacity,
              static_cast<long long>(experts::capacity_of(o.tokens, 1, kBalancingCapacity, 4)),
              static_cast<long long>(o.steps));
  const Trained without = train_router(o, 0.0, world.recorder()), with = train_router(o, 0.1, world.recorder());
  std::printf("  coefficient 0    step 1: kept %-14s dropped %3lld   step %lld: kept %-14s dropped %3lld\n",
              counts_text(without.first).c_str(), static_cast<long long>(without.dropped_first),
              static_cast<long long>(o.steps), counts_text(without.last).c_str(),
              static_cast<long long>(without.dropped_last));
  std::printf("  coefficient 0.1  step 1: kept %-14s dropped %3lld   step %lld: kept %-14s dropped %3lld\n",
              counts_text(with.first).c_str(), static_cast<long long>(with.dropped_first),
              static_cast<long long>(o.steps), counts_text(with.last).c_str(),
              static_cast<long long>(with.dropped_last));
  std::printf("  Look: without the loss the favoured expert keeps its tokens and the capacity drops the\n"
              "  excess (a dropped token skips the layer: only the residual carries it); with it, the\n"
              "  router spreads them and fewer are dropped.\n");
  return with.dropped_last < without.dropped_last;
}

// ------------------------------------------------------------------ part 3

// The same model on a group of G ranks: E experts, E/G on each.
struct Parallel {
  int group = 0;  // G
  double difference = 0;
  double largest = 0;  // the largest value compared (the experts' gradients are sums over the group)
  experts::MoeStats stats;  // rank 0's
  int64_t sent_bytes = 0;   // rank 0, from the trace (the group of every rank only)
};

// Every rank of `world` calls it; `group` is this rank's group of G (the
// world itself when G is every rank: part 4 reads its bytes from the trace).
Parallel expert_parallel(comm::Communicator& world, comm::Communicator& group, const Options& o,
                         const lessons::Wire& wire) {
  const int G = group.size();
  const int64_t E = o.experts, per_rank = E / G;
  MoeOptions m;
  m.experts = E, m.top_k = o.top_k, m.capacity_factor = o.capacity_factor;
  const ExpertMlps whole = whole_experts(E, o);
  const at::Tensor gate = seeded({E, o.model}, 1);
  // This rank's tokens, the same whatever the group. The layer's input is an
  // activation of the layers below: its gradient flows back too.
  const at::Tensor x_in = seeded({o.tokens, o.model}, 100 + static_cast<uint64_t>(world.rank())).to(world.device());
  const at::Tensor x = x_in.clone().requires_grad_(true), x_ref = x_in.clone().requires_grad_(true);
  const at::Tensor G_out = seeded({o.tokens, o.model}, 200 + static_cast<uint64_t>(world.rank())).to(world.device());
  Parallel p;
  p.group = G;
  // Expert parallel: my E/G experts.
  ExpertMlps mine(whole->slice(group.rank() * per_rank, per_rank));
  mine->to(world.device());
  const at::Tensor gate_ep = gate.to(world.device()).requires_grad_(true);
  world.barrier();
  const int64_t from = trace::now_us();
  experts::MoeStats stats;
  const at::Tensor out = experts::moe_parallel(group, x, experts::route(at::linear(x, gate_ep), m.top_k), *mine, m,
                                               &stats);
  (out * G_out).sum().backward();
  world.barrier();
  if (&group == &world) p.sent_bytes = wire.messages_sent(from, trace::now_us());
  // Every expert here, my tokens; the experts' gradients summed over the group's ranks.
  ExpertMlps all(whole->slice(0, E));
  all->to(world.device());
  const at::Tensor gate_ref = gate.to(world.device()).requires_grad_(true);
  const at::Tensor ref = experts::moe_local(x_ref, experts::route(at::linear(x_ref, gate_ref), m.top_k), *all, m);
  (ref * G_out).sum().backward();
  double worst = std::max({largest_difference(out, ref), largest_difference(gate_ep.grad(), gate_ref.grad()),
                           largest_difference(x.grad(), x_ref.grad())});
  double largest = std::max({largest_value(ref), largest_value(gate_ref.grad()), largest_value(x_ref.grad())});
  const std::vector<at::Tensor> got = mine->parameters(), want = all->parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    at::Tensor summed = want[i].grad().clone();
    group.native_all_reduce(summed);
    const at::Tensor mine_of_it = summed.narrow(0, group.rank() * per_rank, per_rank);
    worst = std::max(worst, largest_difference(got[i].grad(), mine_of_it));
    largest = std::max(largest, largest_value(mine_of_it));
  }
  p.difference = lessons::max_over_ranks(world, worst);
  p.largest = lessons::max_over_ranks(world, largest);
  if (world.rank() == 0) p.stats = stats;
  return p;
}

// The model on groups of every size G that divides the ranks, the whole world last.
std::vector<Parallel> on_every_group(comm::Communicator& world, const Options& o, const lessons::Wire& wire) {
  std::vector<Parallel> runs;
  for (int G = 1; G < world.size(); ++G) {
    if (world.size() % G != 0) continue;
    const auto group = world.split(/*color=*/world.rank() / G, /*key=*/world.rank(), "experts" + std::to_string(G));
    runs.push_back(expert_parallel(world, *group, o, wire));
  }
  runs.push_back(expert_parallel(world, world, o, wire));
  return runs;
}

bool equal_to_every_expert(comm::Communicator& world, const std::vector<Parallel>& runs, const Options& o) {
  // float32 rounds a value near 100 (a gradient summed over 8 ranks) to
  // about 1e-5: the difference allowed grows with the values compared.
  bool ok = true;
  double largest = 1;
  for (const Parallel& p : runs) {
    ok = ok && p.difference <= kSame * std::max(1.0, p.largest);
    largest = std::max(largest, p.largest);
  }
  if (world.rank() != 0) return ok;
  std::printf("\n3. Expert parallelism: one model, %lld experts, top-%lld, %s, on G ranks\n"
              "  each rank routes its %lld tokens, sends each kept row to its expert's rank (all-to-all\n"
              "  of the counts, then all-to-all-v of the rows), runs its experts, sends the results\n"
              "  back; the backward goes through the same exchanges reversed. The %d ranks in groups\n"
              "  of G, each rank holding E/G experts, against every expert on every rank (outputs, the\n"
              "  input's and the router's gradients, each expert's gradient summed over the group):\n"
              "     G   E/G   rank 0 sent rows per rank     received                  largest difference\n",
              static_cast<long long>(o.experts), static_cast<long long>(o.top_k),
              capacity_text(o.capacity_factor).c_str(), static_cast<long long>(o.tokens), world.size());
  for (const Parallel& p : runs)
    std::printf("  %4d %5lld   %-29s %-25s %.2e\n", p.group, static_cast<long long>(o.experts / p.group),
                counts_text(p.stats.sent_rows).c_str(), counts_text(p.stats.received_rows).c_str(), p.difference);
  std::printf("  the values compared reach %.1f; 1e-5 x that is allowed (float32's rounding of the sums)\n"
              "  Look: one model whatever G; G = 1 is every expert on every rank, with nothing to send.\n",
              largest);
  return ok;
}

// ------------------------------------------------------------------ part 4

// "32 + 29 + 32 = 93": the rows to or from the other ranks, and their sum.
std::string others_text(const std::vector<int64_t>& rows, int64_t* total) {
  std::string text;
  *total = 0;
  for (size_t q = 1; q < rows.size(); ++q) {
    text += (text.empty() ? "" : " + ") + std::to_string(rows[q]);
    *total += rows[q];
  }
  return rows.size() > 2 ? text + " = " + std::to_string(*total) : std::to_string(*total);
}

bool bytes(comm::Communicator& world, const Parallel& p, const Options& o) {
  if (world.rank() != 0) return true;
  const int G = world.size();
  int64_t dispatched = 0, returned = 0;
  const std::string dispatched_text = others_text(p.stats.sent_rows, &dispatched);
  const std::string returned_text = others_text(p.stats.received_rows, &returned);
  const int64_t per_rank = o.experts / G, row = o.model * 4, counts = (G - 1) * per_rank * 8;
  const int64_t rows = 2 * (dispatched + returned) * row, formula = counts + rows;
  std::printf("\n4. Bytes per step (rank 0 of the %d, forward and backward, from the trace)\n"
              "  dispatched: the rows rank 0 sends to the other ranks' experts = %s\n"
              "  returned: the rows the other ranks sent rank 0's experts, sent back = %s\n"
              "  counts  (G-1) x E/G x 8 = %d x %lld x 8 = %lld\n"
              "  rows    2 x (dispatched + returned) x d x 4 = 2 x (%lld + %lld) x %lld x 4 = %lld\n"
              "  formula %lld, traced %lld\n",
              G, dispatched_text.c_str(), returned_text.c_str(), G - 1, static_cast<long long>(per_rank),
              static_cast<long long>(counts),
              static_cast<long long>(dispatched), static_cast<long long>(returned), static_cast<long long>(o.model),
              static_cast<long long>(rows), static_cast<long long>(formula), static_cast<long long>(p.sent_bytes));
  // The closed form: every choice kept and the choices spread evenly, rank 0
  // dispatches T k (G-1)/G rows and returns as many, each crossing twice
  // (forward, then its gradient): 4 T k (G-1)/G d floats.
  const double T = double(o.tokens), k = double(o.top_k), d = double(o.model), h = double(o.hidden);
  const double closed = 4 * T * k * (G - 1) / G * d * 4;
  // Against the experts' work: a row costs two products of d x h forward
  // (4 d h FLOPs) and twice that backward.
  int64_t computed = 0;
  for (const int64_t r : p.stats.received_rows) computed += r;
  const double flops = 12 * d * h * double(computed);
  std::printf("  closed form, every choice kept and spread evenly over the G ranks: 4 T k (G-1)/G d floats\n"
              "    = 4 x %lld x %lld x %d/%d x %lld x 4 = %.0f bytes; traced, less the counts, %lld (%.2fx)\n"
              "  against the experts' work, 12 d h FLOPs a row (two d x h products, forward and backward):\n"
              "    rank 0's experts ran %lld rows, %.0f FLOPs, for %lld bytes sent: %.3f bytes a FLOP;\n"
              "    in the closed form 4 (G-1) / (3 G h) = %.3f: the wider the experts, the less it weighs\n",
              static_cast<long long>(o.tokens), static_cast<long long>(o.top_k), G - 1, G,
              static_cast<long long>(o.model), closed, static_cast<long long>(p.sent_bytes - counts),
              double(p.sent_bytes - counts) / closed,
              static_cast<long long>(computed), flops, static_cast<long long>(p.sent_bytes),
              double(p.sent_bytes) / flops, 4.0 * (G - 1) / (3.0 * G * h));
  std::printf("  Look: rank 0 sends both in the forward (the rows) and again in the backward (their\n"
              "  gradients), and how many changes every step with the router: the counts go first.\n");
  return formula == p.sent_bytes;
}

void run(comm::Communicator& world, const Options& o, lessons::Parts& parts) {
  const int threads = lessons::share_cores(o.threads);
  if (o.experts % world.size() != 0)
    throw comm::SetupError("lesson 16: --experts " + std::to_string(o.experts) + " do not spread over " +
                           std::to_string(world.size()) + " ranks: give --experts a multiple of " +
                           std::to_string(world.size()) + ", or ranks that divide " + std::to_string(o.experts));
  if (world.rank() == 0)
    std::printf("Lesson 16: expert parallelism  (%s backend, %s, %d thread(s) each)\n", world.backend().c_str(),
                comm::counted(world.size(), "rank").c_str(), threads);
  lessons::Wire wire(world);
  bool ok = true;

  parts.begin(world, "Routing by hand");
  ok = by_hand(world, o) && ok;

  parts.begin(world, "The balancing loss at work");
  ok = balancing(world, o) && ok;

  parts.begin(world, "Expert parallelism");
  const std::vector<Parallel> runs = on_every_group(world, o, wire);
  ok = equal_to_every_expert(world, runs, o) && ok;

  parts.begin(world, "Bytes per step");
  ok = bytes(world, runs.back(), o) && ok;

  if (world.rank() == 0)
    std::printf("\nNext: --ranks 2 and 8 (the same %lld experts), --dropless, --top-k 1, --backend gloo under\n"
                "distlab-run.\n",
                static_cast<long long>(o.experts));
  if (lessons::max_over_ranks(world, ok ? 0.0 : 1.0) > 0) throw std::runtime_error("a check did not hold (see above)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"Routing by hand", "The balancing loss at work",
                        "Expert parallelism", "Bytes per step"});
  CLI::App app{"Lesson 16: expert parallelism: routing by hand, the balancing loss at work, one model's experts spread "
               "over groups of G ranks equal to every expert on every rank, bytes per step beside the formula"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--experts", o.experts, "experts E, the model's whatever the ranks (the ranks must divide it)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--top-k", o.top_k, "experts per token (at most 4: part 1 routes to 4 experts)")
      ->check(CLI::Range(1, 4))->capture_default_str();
  auto* capacity = app.add_option("--capacity-factor", o.capacity_factor,
                                  "capacity = ceil(T k cf / E); 0: dropless, as --dropless")
                       ->check(CLI::Range(0.0, 64.0))
                       ->capture_default_str();
  bool dropless = false;
  app.add_flag("--dropless", dropless, "no capacity: every choice kept (the same as --capacity-factor 0)")
      ->excludes(capacity);
  app.add_option("--tokens", o.tokens, "tokens per rank")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--model", o.model, "model width d")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--hidden", o.hidden, "each expert's hidden width")->check(CLI::Range(1, 16384))->capture_default_str();
  app.add_option("--steps", o.steps, "part 2's training steps")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (dropless) o.capacity_factor = 0;
  return lessons::run_lesson("lesson_16_expert_parallel", o.job,
                             [&](comm::Communicator& comm) { run(comm, o, parts); });
}
