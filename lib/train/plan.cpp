#include "train/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "comm/backward_thread.hpp"
#include "data/batching.hpp"
#include "models/transformer_lm.hpp"
#include "train/dimensions.hpp"

namespace distlab::train {

namespace {

std::string n(int64_t value) { return std::to_string(value); }

std::vector<std::string> dimension_refusals(const PlanOptions& o, const ModelFacts& model) {
  std::vector<std::string> out;
  for (const Dimension& d : dimensions()) d.refusals(o, model, out);
  return out;
}

// The schedule's own rules (pipeline::ScheduleError), for sizes the
// dimensions' rules accept.
void check_schedule(const PlanOptions& o, int64_t microbatches) {
  (void)pipeline::make_schedule(o.pipeline.schedule, o.layout.pipeline, static_cast<int>(microbatches),
                                o.pipeline.stages_per_rank);
}

}  // namespace

ParallelPlan::ParallelPlan(PlanOptions options, ModelFacts model)
    : o_(std::move(options)), model_(std::move(model)), microbatches_(o_.pipeline.microbatches) {
  const int64_t R = o_.layout.replicas;
  if (model_.batch_size >= R && R >= 1)
    microbatches_ = std::min(microbatches_, data::replica_columns(model_.batch_size, R - 1, R).count);
}

std::string ParallelPlan::strategy() const {
  return o_.data.zero > 0 ? "ZeRO-" + n(o_.data.zero) : std::string("DDP");
}

ModelFacts model_facts(const models::TransformerLmOptions& model, int64_t batch_size) {
  ModelFacts facts;
  facts.layers = model.nlayers;
  facts.heads = model.nhead;
  facts.ffn = model.nhid;
  facts.causal = model.causal;
  facts.dropout = model.dropout;
  facts.moe = model.moe;
  facts.batch_size = batch_size;
  return facts;
}

Roles ParallelPlan::roles_of(const Place& p) const {
  Roles roles;
  roles.prints = p.tensor == 0 && p.context == 0;
  roles.gathers_checkpoint = averaging_place(p, o_.layout).rank < std::max(1, o_.experts.parallel);  // the first expert group
  roles.speaks_for_stage = p.replica == 0 && p.tensor == 0 && p.context == 0;
  return roles;
}

bool ParallelPlan::waits_inside_backward() const {
  return o_.layout.tensor > 1 || o_.layout.context > 1 || o_.experts.parallel > 1 || o_.data.zero == 3;
}

std::string ParallelPlan::refusal_on_a_shared_engine_thread() const {
  if (!waits_inside_backward()) return "";
  return "thread ranks sharing a GPU cannot run " + o_.layout.text() + " with " + strategy() +
         (o_.experts.parallel > 1 ? " and experts over " + std::to_string(o_.experts.parallel) + " ranks" : "") + ": " +
         comm::shared_engine_thread_reason();
}

std::vector<std::string> ParallelPlan::refusals() const {
  std::vector<std::string> out = dimension_refusals(o_, model_);
  if (!out.empty()) return out;  // the schedule's rules read sizes these found wrong
  try {
    check_schedule(o_, microbatches_);
  } catch (const pipeline::ScheduleError& e) {
    out.push_back(e.what());
  }
  return out;
}

void ParallelPlan::check() const {
  const std::vector<std::string> refused = dimension_refusals(o_, model_);
  if (!refused.empty()) throw std::invalid_argument(refused.front());
  check_schedule(o_, microbatches_);  // throws its ScheduleError
}

int ParallelPlan::rank_of_stage(int stage) const {
  if (stage < 0 || stage >= stages())
    throw std::invalid_argument("stage " + n(stage) + " is not one of the plan's " + n(stages()));
  return pipeline::rank_of_stage(stage, o_.layout.pipeline, pipeline::placement_of(o_.pipeline.schedule));
}

std::vector<int> ParallelPlan::stages_held(int pipeline_rank) const {
  std::vector<int> held;
  for (int s = 0; s < stages(); ++s)
    if (rank_of_stage(s) == pipeline_rank) held.push_back(s);
  return held;
}

std::vector<std::string> ParallelPlan::describe() const {
  std::vector<std::string> lines;
  for (const Dimension& d : dimensions()) d.describe(*this, lines);
  return lines;
}

}  // namespace distlab::train
