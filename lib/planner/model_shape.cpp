#include "planner/model_shape.hpp"

#include <algorithm>

#include "memory/precision.hpp"
#include "memory/recompute.hpp"

namespace distlab::planner {

ModelShape model_shape(const std::string& preset, int64_t vocab) {
  const models::TransformerLmOptions m = models::transformer_lm_preset(preset, vocab);  // throws, naming the presets
  ModelShape shape;
  shape.preset = preset;
  shape.vocab = vocab;
  shape.width = m.emsize;
  shape.ffn = m.nhid;
  shape.layers = m.nlayers;
  shape.heads = m.nhead;
  shape.max_len = m.max_len;
  shape.dropout = m.dropout;
  return shape;
}

int64_t replica_columns(const ModelShape& model, int replicas) {
  return (model.batch + replicas - 1) / replicas;  // data::replica_columns: the first bsz % R one more
}

int64_t microbatch_columns(const ModelShape& model, int replicas, int64_t microbatches) {
  const int64_t columns = replica_columns(model, replicas);
  return (columns + microbatches - 1) / microbatches;  // tensor_split: the first n % m one more
}

train::PlanOptions plan_options(const ModelShape& model, const Choice& c) {
  train::PlanOptions plan;
  plan.layout = c.layout;
  plan.schedule = c.schedule;
  plan.stages_per_rank = c.stages_per_rank;
  plan.zero = c.zero;
  plan.layers = model.layers;
  plan.batch_size = model.batch;
  plan.heads = model.heads;
  plan.ffn = model.ffn;
  plan.causal = true;
  plan.dropout = model.dropout;
  plan.moe = model.moe;
  plan.expert_parallel = c.expert_parallel;
  plan.recompute = c.recompute;
  plan.precision = c.precision;
  // As the trainer runs it: m at most the columns of the smallest replica.
  const int R = std::max(1, c.layout.replicas);
  plan.microbatches = model.batch >= R ? std::min<int64_t>(c.microbatches, model.batch / R) : c.microbatches;
  return plan;
}

std::string capstone_command(const ModelShape& model, const Choice& c) {
  const train::Layout& l = c.layout;
  std::string line = "lesson_11_capstone --preset " + model.preset + " --pipeline " + std::to_string(l.pipeline) +
                     " --replicas " + std::to_string(l.replicas);
  if (l.tensor > 1) line += " --tensor " + std::to_string(l.tensor);
  if (l.context > 1) line += " --context " + std::to_string(l.context);
  line += " --schedule " + std::string(pipeline::kind_name(c.schedule));
  line += " --stages-per-rank " + std::to_string(c.stages_per_rank);
  line += " --chunks " + std::to_string(c.microbatches);
  if (c.zero > 0) line += " --zero " + std::to_string(c.zero);
  if (model.moe.enabled()) {
    line += " --experts " + std::to_string(model.moe.experts) + " --top-k " + std::to_string(model.moe.top_k);
    if (c.expert_parallel > 1) line += " --expert-parallel " + std::to_string(c.expert_parallel);
  }
  if (c.recompute != memory::Recompute::kNone) line += " --recompute " + std::string(memory::to_string(c.recompute));
  if (c.precision != memory::Precision::kFp32) line += " --precision " + std::string(memory::to_string(c.precision));
  return line;
}

std::string choice_name(const Choice& c) {
  const train::Layout& l = c.layout;
  std::string name = std::to_string(l.pipeline) + "x" + std::to_string(l.replicas) + "x" + std::to_string(l.context) +
                     "x" + std::to_string(l.tensor) + " " + pipeline::kind_name(c.schedule);
  if (c.stages_per_rank > 1) name += " v" + std::to_string(c.stages_per_rank);
  name += " m" + std::to_string(c.microbatches) + " " + (c.zero > 0 ? "zero" + std::to_string(c.zero) : "ddp");
  if (c.expert_parallel > 1) name += " ep" + std::to_string(c.expert_parallel);
  if (c.recompute != memory::Recompute::kNone) name += " " + std::string(memory::to_string(c.recompute));
  if (c.precision != memory::Precision::kFp32) name += " " + std::string(memory::to_string(c.precision));
  return name;
}

}  // namespace distlab::planner
