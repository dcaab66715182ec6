#include "train/dimensions.hpp"

#include <cstdio>

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

using Lines = std::vector<std::string>;

// ---- the layout: every size, and the groups of data x pipeline ----------

void layout_refusals(const PlanOptions& o, const ModelFacts&, Lines& out) {
  for (const Axis axis : kAxes)
    if (o.layout.size(axis) < 1)
      out.push_back(std::string("the ") + axis_name(axis) + " dimension has size " + n(o.layout.size(axis)) +
                    ": every dimension needs at least 1 rank (--pipeline, --replicas, --context, --tensor)");
}

void layout_describe(const ParallelPlan& plan, Lines& lines) {
  const Layout& l = plan.layout();
  lines.push_back("pipelines (stage groups):" + groups_text(group_members(l, Axis::kPipeline)) +
                  "   replica groups (" + plan.strategy() + " per stage):" + groups_text(group_members(l, Axis::kData)));
}

// ---- data: the strategy and the batch -------------------------------------

void data_refusals(const PlanOptions& o, const ModelFacts& model, Lines& out) {
  if (o.data.zero < 0 || o.data.zero > 3)
    out.push_back("--zero " + n(o.data.zero) +
                  ": expected 0 (DDP), 1 (ZeRO-1: optimizer state sharded), 2 (ZeRO-2: gradients too) or 3 (ZeRO-3: "
                  "parameters too)");
  if (model.batch_size > 0 && model.batch_size < o.layout.replicas)
    out.push_back("batch " + n(model.batch_size) + " cannot be split among " + n(o.layout.replicas) +
                  " replicas; use a batch size of at least --replicas");
}

void no_lines(const ParallelPlan&, Lines&) {}

// ---- pipeline: v and the layers (the schedule's own rules: plan.cpp) -----

void pipeline_refusals(const PlanOptions& o, const ModelFacts& model, Lines& out) {
  const int v = o.pipeline.stages_per_rank;
  const int P = o.layout.pipeline;
  if (v < 1) out.push_back("--stages-per-rank " + n(v) + ": at least 1");
  const int64_t stages = int64_t(P) * v;
  if (model.layers > 0 && v > 1 && stages > model.layers)
    out.push_back(n(P) + " pipeline ranks x " + n(v) + " stages per rank need " + n(stages) + " layers, the model has " +
                  n(model.layers) + ": use --layers " + n(stages) + ", fewer --stages-per-rank, or a larger preset");
  else if (model.layers > 0 && stages > model.layers)
    out.push_back(n(stages) + " pipeline stages need " + n(stages) + " layers, the model has " + n(model.layers) +
                  ": use --layers " + n(stages) + ", fewer --pipeline, or a larger preset");
}

void pipeline_describe(const ParallelPlan& plan, Lines& lines) {
  const PipelineOptions& p = plan.options().pipeline;
  if (p.stages_per_rank == 1 || !plan.refusals().empty()) return;
  std::string line =
      n(p.stages_per_rank) + " stages per pipeline rank (" + pipeline::kind_name(p.schedule) + "), " + n(plan.stages()) + " in all:";
  for (int r = 0; r < plan.layout().pipeline; ++r) {
    std::string list;
    for (const int s : plan.stages_held(r)) list += (list.empty() ? "" : ", ") + n(s);
    line += std::string(r ? ";" : "") + " rank " + n(r) + " holds " + list;
  }
  lines.push_back(line);
}

// ---- tensor: heads and feed-forward columns cut ---------------------------

void tensor_refusals(const PlanOptions& o, const ModelFacts& model, Lines& out) {
  const int T = o.layout.tensor;
  if (T > 1 && model.heads > 0 && model.heads % T != 0)
    out.push_back("--tensor " + n(T) + " cuts each layer by heads: " + n(model.heads) + " heads do not split among " +
                  n(T) + " tensor ranks; tensor sizes that would: " + tensor_parallel::sizes_that_divide(model.heads));
  else if (T > 1 && model.ffn > 0 && !model.moe.enabled() && model.ffn % T != 0)
    out.push_back("--tensor " + n(T) + " cuts each layer's feed-forward by columns: " + n(model.ffn) +
                  " do not split among " + n(T) +
                  " tensor ranks; tensor sizes that would: " + tensor_parallel::sizes_that_divide(model.ffn));
}

void tensor_describe(const ParallelPlan& plan, Lines& lines) {
  if (plan.layout().tensor > 1)
    lines.push_back("tensor groups (each stage's layers cut):" + groups_text(group_members(plan.layout(), Axis::kTensor)));
}

// ---- context: sequences split -------------------------------------------

void context_refusals(const PlanOptions& o, const ModelFacts& model, Lines& out) {
  const Layout& l = o.layout;
  if (l.context > 1 && !model.causal)
    out.push_back("--context " + n(l.context) +
                  " needs a causal model: a sequence whose length does not split is padded at its end, which only "
                  "a causal model's real tokens never attend (the tutorial's unmasked model would)");
  const int64_t heads = model.heads;
  if (l.context > 1 && o.context.method == context_parallel::Method::kUlysses && heads > 0 && l.tensor >= 1 &&
      (heads % l.tensor != 0 || (heads / l.tensor) % l.context != 0)) {
    std::string would;
    for (int c = 1; c <= heads; ++c)
      if (heads % l.tensor == 0 && (heads / l.tensor) % c == 0) would += (would.empty() ? "" : ", ") + n(c);
    out.push_back("Ulysses gives each context rank whole heads: " + n(heads) + " heads" +
                  (l.tensor > 1 ? " over " + n(l.tensor) + " tensor ranks" : std::string()) + " do not divide by " +
                  n(l.context) + " context ranks (context sizes that would: " + would +
                  "; or --context-method ring, which takes any)");
  }
}

void context_describe(const ParallelPlan& plan, Lines& lines) {
  const Layout& l = plan.layout();
  if (l.context == 1) return;
  const ContextOptions& c = plan.options().context;
  lines.push_back("context groups (each sequence split, " + std::string(context_parallel::to_string(c.method)) +
                  " attention, " + context_parallel::to_string(c.layout) +
                  " chunks):" + groups_text(group_members(l, Axis::kContext)));
  lines.push_back("gradients average over data x context:" + groups_text(averaging_members(l)) +
                  (plan.model().dropout > 0 ? " (no dropout on the attention weights: no rank holds a whole row of them)"
                                            : ""));
}

// ---- experts: routed feed-forwards, spread over N replicas ---------------

void expert_refusals(const PlanOptions& o, const ModelFacts& model, Lines& out) {
  const Layout& l = o.layout;
  const models::MoeFeedForwardOptions& moe = model.moe;
  if (moe.enabled() && (moe.top_k < 1 || moe.top_k > moe.experts))
    out.push_back("--top-k " + n(moe.top_k) + " must be in [1, " + n(moe.experts) + "] (--experts)");
  const int N = o.experts.parallel;
  if (N < 1) out.push_back("--expert-parallel " + n(N) + ": at least 1");
  if (N <= 1) return;
  if (!moe.enabled()) {
    out.push_back("--expert-parallel " + n(N) + " spreads experts over the replicas: the model has none (--experts E)");
    return;
  }
  if ((l.replicas * l.context) % N != 0)
    out.push_back("--expert-parallel " + n(N) + " borrows its ranks from each stage's " + n(l.replicas * l.context) +
                  " replicas x context ranks (the ranks its gradients average over): N must divide --replicas x "
                  "--context");
  if (moe.experts % N != 0)
    out.push_back("--expert-parallel " + n(N) + " gives each rank of an expert group the same number of experts: " +
                  n(moe.experts) + " experts do not divide by " + n(N) + " (--experts)");
}

void expert_describe(const ParallelPlan& plan, Lines& lines) {
  const models::MoeFeedForwardOptions& moe = plan.model().moe;
  if (!moe.enabled()) return;
  const Layout& l = plan.layout();
  char capacity[48];
  std::snprintf(capacity, sizeof capacity, moe.capacity_factor > 0 ? "capacity factor %.2f" : "dropless",
                moe.capacity_factor);
  const PlanOptions& o = plan.options();
  const int N = o.experts.parallel;
  lines.push_back("experts: each layer's feed-forward " + n(moe.experts) + " experts, top-" + n(moe.top_k) + ", " +
                  capacity +
                  (N > 1 ? "; spread over expert groups of " + n(N) + " ranks, " + n(moe.experts / N) +
                               " per rank (all-to-all)"
                         : "; every rank holds all of its stages' experts (averaged by " + plan.strategy() +
                               " with the rest)"));
  if (l.tensor > 1)
    lines.push_back(std::string("experts on tensor ranks: each layer's experts whole on every tensor rank, which all "
                                "route the same tokens alike (the experts are not cut") +
                    (N > 1 ? "; each tensor rank has its own expert groups)" : ")"));
  if (l.context > 1)
    lines.push_back("experts on context ranks: each rank routes its own tokens (routing is per token; a capacity "
                    "counts this rank's tokens, and the auxiliary losses average over the context ranks)");
  if (N > 1 && o.data.zero > 0)
    lines.push_back("experts under " + plan.strategy() + ": their optimizer state" +
                    (o.data.zero >= 2 ? " and gradients" : "") +
                    " sharded over the ranks holding the same experts, the rest over the replicas" +
                    (o.data.zero == 3 ? " (their parameters stay whole: each rank holds " + n(moe.experts / N) +
                                            " of the " + n(moe.experts) + " already)"
                                      : ""));
  if (N > 1 && (l.replicas * l.context) % N == 0)
    lines.push_back("expert groups:" + groups_text(expert_members(l, N)) + "   the same experts (gradients summed, / " +
                    n(l.replicas * l.context) + "):" + groups_text(expert_copy_members(l, N)));
}

// ---- memory: recomputation, precision, the loss scaler -------------------

void memory_refusals(const PlanOptions& o, const ModelFacts& model, Lines& out) {
  const Layout& l = o.layout;
  const MemoryOptions& m = o.memory;
  if (m.recompute == memory::Recompute::kMatmuls) {
    if (l.tensor > 1 || l.context > 1)
      out.push_back("--recompute matmuls with --tensor " + n(l.tensor) + " --context " + n(l.context) +
                    ": it keeps the products of the whole layer, and a cut layer's products are its pieces; use "
                    "--recompute full or selective");
    if (model.moe.enabled())
      out.push_back("--recompute matmuls with --experts: the experts' products are dispatched apart from the kept "
                    "ones; use --recompute full or selective");
  }
  if (m.inject_overflow_at_step > 0 && !m.loss_scaling)
    out.push_back("--inject-overflow-at-step " + n(m.inject_overflow_at_step) +
                  " without a loss scaler would step every parameter to NaN; add --loss-scale dynamic");
}

void memory_describe(const ParallelPlan& plan, Lines& lines) {
  const MemoryOptions& m = plan.options().memory;
  const Layout& l = plan.layout();
  if (m.recompute == memory::Recompute::kFull)
    lines.push_back("activations: every layer recomputed in its backward (--recompute full), only its input kept");
  if (m.recompute == memory::Recompute::kSelective)
    lines.push_back("activations: each layer's attention core recomputed in its backward (--recompute selective), "
                    "the s x s scores and weights not kept");
  if (m.recompute == memory::Recompute::kMatmuls)
    lines.push_back("activations: each layer recomputed in its backward but its matrix products (--recompute "
                    "matmuls), their outputs kept");
  const bool full = m.recompute == memory::Recompute::kFull;
  if ((full && (l.tensor > 1 || l.context > 1 || plan.options().experts.parallel > 1)) ||
      (m.recompute == memory::Recompute::kSelective && l.context > 1))
    lines.push_back(std::string("activations: the recomputation runs the ") +
                    (full ? "layer's collectives" : "attention core's exchanges") +
                    " again, every rank of the group in the same order");
  if (m.precision != memory::Precision::kFp32)
    lines.push_back(std::string("precision: matrix products in ") + memory::to_string(m.precision) +
                    " (--precision), norms and the loss in fp32; fp32 parameters, gradients and optimizer");
  if (m.loss_scaling)
    lines.push_back("loss scaling: dynamic (--loss-scale dynamic), a step with an inf or a NaN skipped and the scale "
                    "halved, doubled after clean steps");
}

}  // namespace

const std::vector<Dimension>& dimensions() {
  static const std::vector<Dimension> list{
      {"layout", layout_refusals, layout_describe},
      {"data", data_refusals, no_lines},
      {"context", context_refusals, context_describe},
      {"tensor", tensor_refusals, tensor_describe},
      {"experts", expert_refusals, expert_describe},
      {"pipeline", pipeline_refusals, pipeline_describe},
      {"memory", memory_refusals, memory_describe},
  };
  return list;
}

}  // namespace distlab::train
