#include "train/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "comm/backward_thread.hpp"
#include "tensor_parallel/split.hpp"

namespace distlab::train {

namespace {

std::string n(int64_t value) { return std::to_string(value); }

// " {0, 2} {1, 3}"
std::string groups_text(const std::vector<std::vector<int>>& groups) {
  std::string text;
  for (const auto& group : groups) {
    text += " {";
    for (size_t i = 0; i < group.size(); ++i) text += (i ? ", " : "") + n(group[i]);
    text += "}";
  }
  return text;
}

// The rules that need no schedule, in the order a user meets them.
std::vector<std::string> layout_refusals(const PlanOptions& o) {
  std::vector<std::string> out;
  const Layout& l = o.layout;
  for (const Axis axis : kAxes)
    if (l.size(axis) < 1)
      out.push_back(std::string("the ") + axis_name(axis) + " dimension has size " + n(l.size(axis)) +
                    ": every dimension needs at least 1 rank (--pipeline, --replicas, --context, --tensor)");
  if (o.zero < 0 || o.zero > 3)
    out.push_back("--zero " + n(o.zero) +
                  ": expected 0 (DDP), 1 (ZeRO-1: optimizer state sharded), 2 (ZeRO-2: gradients too) or 3 (ZeRO-3: "
                  "parameters too)");
  if (o.stages_per_rank < 1) out.push_back("--stages-per-rank " + n(o.stages_per_rank) + ": at least 1");
  const int64_t stages = int64_t(l.pipeline) * o.stages_per_rank;
  if (o.layers > 0 && o.stages_per_rank > 1 && stages > o.layers)
    out.push_back(n(l.pipeline) + " pipeline ranks x " + n(o.stages_per_rank) + " stages per rank need " + n(stages) +
                  " layers, the model has " + n(o.layers) + ": use --layers " + n(stages) +
                  ", fewer --stages-per-rank, or a larger preset");
  else if (o.layers > 0 && stages > o.layers)
    out.push_back(n(stages) + " pipeline stages need " + n(stages) + " layers, the model has " + n(o.layers) +
                  ": use --layers " + n(stages) + ", fewer --pipeline, or a larger preset");
  if (l.tensor > 1 && o.heads > 0 && o.heads % l.tensor != 0)
    out.push_back("--tensor " + n(l.tensor) + " cuts each layer by heads: " + n(o.heads) +
                  " heads do not split among " + n(l.tensor) +
                  " tensor ranks; tensor sizes that would: " + tensor_parallel::sizes_that_divide(o.heads));
  else if (l.tensor > 1 && o.ffn > 0 && !o.moe.enabled() && o.ffn % l.tensor != 0)
    out.push_back("--tensor " + n(l.tensor) + " cuts each layer's feed-forward by columns: " + n(o.ffn) +
                  " do not split among " + n(l.tensor) +
                  " tensor ranks; tensor sizes that would: " + tensor_parallel::sizes_that_divide(o.ffn));
  if (l.context > 1 && !o.causal)
    out.push_back("--context " + n(l.context) +
                  " needs a causal model: a sequence whose length does not split is padded at its end, which only "
                  "a causal model's real tokens never attend (the tutorial's unmasked model would)");
  if (l.context > 1 && o.context_method == context_parallel::Method::kUlysses && o.heads > 0 && l.tensor >= 1 &&
      (o.heads % l.tensor != 0 || (o.heads / l.tensor) % l.context != 0)) {
    std::string would;
    for (int c = 1; c <= o.heads; ++c)
      if (o.heads % l.tensor == 0 && (o.heads / l.tensor) % c == 0) would += (would.empty() ? "" : ", ") + n(c);
    out.push_back("Ulysses gives each context rank whole heads: " + n(o.heads) + " heads" +
                  (l.tensor > 1 ? " over " + n(l.tensor) + " tensor ranks" : std::string()) + " do not divide by " +
                  n(l.context) + " context ranks (context sizes that would: " + would +
                  "; or --context-method ring, which takes any)");
  }
  if (o.moe.enabled() && (o.moe.top_k < 1 || o.moe.top_k > o.moe.experts))
    out.push_back("--top-k " + n(o.moe.top_k) + " must be in [1, " + n(o.moe.experts) + "] (--experts)");
  const int N = o.expert_parallel;
  if (N < 1) out.push_back("--expert-parallel " + n(N) + ": at least 1");
  if (N > 1 && !o.moe.enabled())
    out.push_back("--expert-parallel " + n(N) + " spreads experts over the replicas: the model has none (--experts E)");
  if (N > 1 && o.moe.enabled() && l.replicas % N != 0)
    out.push_back("--expert-parallel " + n(N) + " borrows its ranks from each stage's " + n(l.replicas) +
                  " replicas: N must divide --replicas");
  if (N > 1 && o.moe.enabled() && o.moe.experts % N != 0)
    out.push_back("--expert-parallel " + n(N) + " gives each rank of an expert group the same number of experts: " +
                  n(o.moe.experts) + " experts do not divide by " + n(N) + " (--experts)");
  if (N > 1 && o.moe.enabled() && (l.tensor > 1 || l.context > 1))
    out.push_back("--expert-parallel " + n(N) + " with --tensor " + n(l.tensor) + " --context " + n(l.context) +
                  ": the expert groups are cut from the replicas of whole stages; a stage cut across tensor or "
                  "context ranks keeps every expert on each of its ranks (use --expert-parallel 1)");
  if (N > 1 && o.zero > 0)
    out.push_back("--expert-parallel " + n(N) + " with --zero " + n(o.zero) +
                  ": ZeRO would shard experts that differ from rank to rank; use DDP (--zero 0)");
  if (o.batch_size > 0 && o.batch_size < l.replicas)
    out.push_back("batch " + n(o.batch_size) + " cannot be split among " + n(l.replicas) +
                  " replicas; use a batch size of at least --replicas");
  if (o.recompute == memory::Recompute::kMatmuls) {
    if (l.tensor > 1 || l.context > 1)
      out.push_back("--recompute matmuls with --tensor " + n(l.tensor) + " --context " + n(l.context) +
                    ": it keeps the products of the whole layer, and a cut layer's products are its pieces; use "
                    "--recompute full or selective");
    if (o.moe.enabled())
      out.push_back("--recompute matmuls with --experts: the experts' products are dispatched apart from the kept "
                    "ones; use --recompute full or selective");
  }
  if (o.inject_overflow_at_step > 0 && !o.loss_scaling)
    out.push_back("--inject-overflow-at-step " + n(o.inject_overflow_at_step) +
                  " without a loss scaler would step every parameter to NaN; add --loss-scale dynamic");
  return out;
}

}  // namespace

std::string ParallelPlan::strategy() const { return o_.zero > 0 ? "ZeRO-" + n(o_.zero) : std::string("DDP"); }

Roles ParallelPlan::roles_of(const Place& p) const {
  Roles roles;
  roles.prints = p.tensor == 0 && p.context == 0;
  roles.gathers_checkpoint = p.replica < std::max(1, o_.expert_parallel) && p.context == 0;
  roles.writes_checkpoint = p.replica == 0 && p.tensor == 0 && p.context == 0;
  return roles;
}

bool ParallelPlan::waits_inside_backward() const {
  return o_.layout.tensor > 1 || o_.layout.context > 1 || o_.expert_parallel > 1 || o_.zero == 3;
}

std::string ParallelPlan::refusal_on_a_shared_engine_thread() const {
  if (!waits_inside_backward()) return "";
  return "thread ranks sharing a GPU cannot run " + o_.layout.text() + " with " + strategy() +
         (o_.expert_parallel > 1 ? " and experts over " + std::to_string(o_.expert_parallel) + " ranks" : "") + ": " +
         comm::shared_engine_thread_reason();
}

std::vector<std::string> ParallelPlan::refusals() const {
  std::vector<std::string> out = layout_refusals(o_);
  if (!out.empty()) return out;  // the schedule's rules read sizes these found wrong
  try {
    (void)pipeline::make_schedule(o_.schedule, o_.layout.pipeline, static_cast<int>(o_.microbatches),
                                  o_.stages_per_rank);
  } catch (const pipeline::ScheduleError& e) {
    out.push_back(e.what());
  }
  return out;
}

void ParallelPlan::check() const {
  const std::vector<std::string> refused = layout_refusals(o_);
  if (!refused.empty()) throw std::invalid_argument(refused.front());
  (void)pipeline::make_schedule(o_.schedule, o_.layout.pipeline, static_cast<int>(o_.microbatches),
                                o_.stages_per_rank);  // throws its ScheduleError
}

int ParallelPlan::rank_of_stage(int stage) const {
  if (stage < 0 || stage >= stages())
    throw std::invalid_argument("stage " + n(stage) + " is not one of the plan's " + n(stages()));
  return pipeline::rank_of_stage(stage, o_.layout.pipeline, pipeline::placement_of(o_.schedule));
}

std::vector<int> ParallelPlan::stages_held(int pipeline_rank) const {
  std::vector<int> held;
  for (int s = 0; s < stages(); ++s)
    if (rank_of_stage(s) == pipeline_rank) held.push_back(s);
  return held;
}

std::vector<std::string> ParallelPlan::describe() const {
  const Layout& l = o_.layout;
  std::vector<std::string> lines{"pipelines (stage groups):" + groups_text(group_members(l, Axis::kPipeline)) +
                                 "   replica groups (" + strategy() + " per stage):" + groups_text(group_members(l, Axis::kData))};
  if (l.context > 1) {
    lines.push_back("context groups (each sequence split, " + std::string(context_parallel::to_string(o_.context_method)) +
                    " attention, " + context_parallel::to_string(o_.context_layout) +
                    " chunks):" + groups_text(group_members(l, Axis::kContext)));
    lines.push_back("gradients average over data x context:" + groups_text(averaging_members(l)) +
                    (o_.dropout > 0 ? " (no dropout on the attention weights: no rank holds a whole row of them)" : ""));
  }
  if (l.tensor > 1) lines.push_back("tensor groups (each stage's layers cut):" + groups_text(group_members(l, Axis::kTensor)));
  if (o_.moe.enabled()) {
    char capacity[48];
    std::snprintf(capacity, sizeof capacity, o_.moe.capacity_factor > 0 ? "capacity factor %.2f" : "dropless",
                  o_.moe.capacity_factor);
    const int N = o_.expert_parallel;
    lines.push_back("experts: each layer's feed-forward " + n(o_.moe.experts) + " experts, top-" + n(o_.moe.top_k) +
                    ", " + capacity +
                    (N > 1 ? "; spread over expert groups of " + n(N) + " replicas, " + n(o_.moe.experts / N) +
                                 " per rank (all-to-all)"
                           : "; every rank holds all of its stages' experts (averaged by " + strategy() +
                                 " with the rest)"));
    if (l.tensor > 1)
      lines.push_back("experts on tensor ranks: each layer's experts whole on every tensor rank, which all route "
                      "the same tokens alike (the experts are not cut)");
    if (l.context > 1)
      lines.push_back("experts on context ranks: each rank routes its own tokens (routing is per token; a capacity "
                      "counts this rank's tokens, and the auxiliary losses average over the context ranks)");
    if (N > 1 && (l.replicas * l.context) % N == 0)
      lines.push_back("expert groups:" + groups_text(expert_members(l, N)) + "   the same experts (gradients summed, / " +
                      n(l.replicas) + "):" + groups_text(expert_copy_members(l, N)));
  }
  if (o_.stages_per_rank > 1 && refusals().empty()) {
    std::string line = n(o_.stages_per_rank) + " stages per pipeline rank (" + pipeline::kind_name(o_.schedule) +
                       "), " + n(stages()) + " in all:";
    for (int r = 0; r < l.pipeline; ++r) {
      std::string list;
      for (const int s : stages_held(r)) list += (list.empty() ? "" : ", ") + n(s);
      line += std::string(r ? ";" : "") + " rank " + n(r) + " holds " + list;
    }
    lines.push_back(line);
  }
  if (o_.recompute == memory::Recompute::kFull)
    lines.push_back("activations: every layer recomputed in its backward (--recompute full), only its input kept");
  if (o_.recompute == memory::Recompute::kSelective)
    lines.push_back("activations: each layer's attention core recomputed in its backward (--recompute selective), "
                    "the s x s scores and weights not kept");
  if (o_.recompute == memory::Recompute::kMatmuls)
    lines.push_back("activations: each layer recomputed in its backward but its matrix products (--recompute "
                    "matmuls), their outputs kept");
  const bool full = o_.recompute == memory::Recompute::kFull;
  if ((full && (o_.layout.tensor > 1 || o_.layout.context > 1 || o_.expert_parallel > 1)) ||
      (o_.recompute == memory::Recompute::kSelective && o_.layout.context > 1))
    lines.push_back(std::string("activations: the recomputation runs the ") +
                    (full ? "layer's collectives" : "attention core's exchanges") +
                    " again, every rank of the group in the same order");
  if (o_.precision != memory::Precision::kFp32)
    lines.push_back(std::string("precision: matrix products in ") + memory::to_string(o_.precision) +
                    " (--precision), norms and the loss in fp32; fp32 parameters, gradients and optimizer");
  if (o_.loss_scaling)
    lines.push_back("loss scaling: dynamic (--loss-scale dynamic), a step with an inf or a NaN skipped and the scale "
                    "halved, doubled after clean steps");
  return lines;
}

}  // namespace distlab::train
