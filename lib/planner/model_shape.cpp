#include "planner/model_shape.hpp"

#include <algorithm>

#include "context_parallel/ring_plan.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"

namespace distlab::planner {

ModelShape model_shape(const std::string& preset, int64_t vocab) {
  ModelShape shape;
  shape.preset = preset;
  shape.lm = models::transformer_lm_preset(preset, vocab);  // throws, naming the presets
  shape.lm.causal = true;  // a language model's, as lesson 11 trains it
  return shape;
}

int64_t replica_columns(const ModelShape& model, int replicas) {
  return (model.batch + replicas - 1) / replicas;  // data::replica_columns: the first bsz % R one more
}

int64_t microbatch_columns(const ModelShape& model, int replicas, int64_t microbatches) {
  const int64_t columns = replica_columns(model, replicas);
  return (columns + microbatches - 1) / microbatches;  // tensor_split: the first n % m one more
}

std::vector<int64_t> microbatch_sizes(const ModelShape& model, int replicas, int64_t microbatches) {
  const int64_t columns = replica_columns(model, replicas);
  std::vector<int64_t> sizes(static_cast<size_t>(microbatches), columns / microbatches);
  for (int64_t i = 0; i < columns % microbatches; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

train::ParallelPlan plan_of(const ModelShape& model, const Choice& c) {
  return train::ParallelPlan(c, train::model_facts(model.lm, model.batch));
}

int64_t sequence_tokens(const ModelShape& m, int context) {
  if (context <= 1) return m.bptt;
  const int64_t chunks = context_parallel::chunk_count(context_parallel::Layout::kZigzag, context);
  return (m.bptt + chunks - 1) / chunks * chunks / context;
}

std::string capstone_command(const ModelShape& model, const Choice& c, const std::string& device) {
  const train::Layout& l = c.layout;
  const std::string launch = device == "cuda" ? "distlab-run --nproc-per-node " + std::to_string(l.world_size()) +
                                                    " -- lesson_11_capstone --backend nccl"
                                              : "lesson_11_capstone";
  std::string line = launch + " --preset " + model.preset + " --pipeline " + std::to_string(l.pipeline) +
                     " --replicas " + std::to_string(l.replicas);
  if (l.tensor > 1) line += " --tensor " + std::to_string(l.tensor);
  if (l.context > 1) line += " --context " + std::to_string(l.context);
  line += " --schedule " + std::string(pipeline::kind_name(c.pipeline.schedule));
  line += " --stages-per-rank " + std::to_string(c.pipeline.stages_per_rank);
  line += " --chunks " + std::to_string(c.pipeline.microbatches);
  if (c.data.zero > 0) line += " --zero " + std::to_string(c.data.zero);
  if (model.lm.moe.enabled()) {
    line += " --experts " + std::to_string(model.lm.moe.experts) + " --top-k " + std::to_string(model.lm.moe.top_k);
    if (c.experts.parallel > 1) line += " --expert-parallel " + std::to_string(c.experts.parallel);
  }
  if (c.memory.recompute != memory::Recompute::kNone) line += " --recompute " + std::string(memory::to_string(c.memory.recompute));
  if (c.memory.precision != memory::Precision::kFp32) line += " --precision " + std::string(memory::to_string(c.memory.precision));
  return line;
}

std::string choice_name(const Choice& c) {
  const train::Layout& l = c.layout;
  std::string name = std::to_string(l.pipeline) + "x" + std::to_string(l.replicas) + "x" + std::to_string(l.context) +
                     "x" + std::to_string(l.tensor) + " " + pipeline::kind_name(c.pipeline.schedule);
  if (c.pipeline.stages_per_rank > 1) name += " v" + std::to_string(c.pipeline.stages_per_rank);
  name += " m" + std::to_string(c.pipeline.microbatches) + " " + (c.data.zero > 0 ? "zero" + std::to_string(c.data.zero) : "ddp");
  if (c.experts.parallel > 1) name += " ep" + std::to_string(c.experts.parallel);
  if (c.memory.recompute != memory::Recompute::kNone) name += " " + std::string(memory::to_string(c.memory.recompute));
  if (c.memory.precision != memory::Precision::kFp32) name += " " + std::string(memory::to_string(c.memory.precision));
  return name;
}

}  // namespace distlab::planner
