#include "train/rank_build.hpp"

#include "checkpoint/checkpointer.hpp"

namespace distlab::train {

std::map<std::string, at::Tensor> RankBuild::stages_state(bool parameters_only) {
  std::map<std::string, at::Tensor> all;
  for (auto& stage : stages)
    for (auto& [name, tensor] : parameters_only ? stage->whole_parameters() : stage->whole_state()) all[name] = tensor;
  return all;
}

namespace {

// Tensors of parameters gathered whole (ZeRO-3) live only while the scopes
// do: they leave as copies.
std::map<std::string, at::Tensor> outliving(std::map<std::string, at::Tensor> state,
                                            const std::vector<std::unique_ptr<WholeScope>>& scopes) {
  for (const auto& scope : scopes)
    if (scope->temporary()) {
      for (auto& item : state) item.second = item.second.detach().clone();
      break;
    }
  return state;
}

}  // namespace

std::map<std::string, at::Tensor> RankBuild::whole_state(bool parameters_only) {
  const auto gathered = whole();
  return outliving(stages_state(parameters_only), gathered);
}

std::optional<std::map<std::string, at::Tensor>> RankBuild::checkpoint_state() {
  const auto gathered = whole();  // every replica, at the same point
  if (!roles.gathers_checkpoint) return std::nullopt;
  std::map<std::string, at::Tensor> state = stages_state(false);  // (the tensor and expert groups gather)
  if (!roles.speaks_for_stage) return std::nullopt;
  return outliving(std::move(state), gathered);
}

std::set<std::string> RankBuild::state_names() const {
  std::set<std::string> names;
  for (const auto& stage : stages) names.merge(stage->state_names());
  return names;
}

void RankBuild::load_state(const std::map<std::string, at::Tensor>& state) {
  const std::set<std::string> names = state_names();
  for (const auto& item : state)
    if (!names.count(item.first))
      throw checkpoint::CheckpointError("checkpoint: '" + item.first +
                                        "' belongs to no stage of this rank; was it written by another model or layout?");
  const auto gathered = whole();  // ZeRO-3: each replica keeps its chunk of what is loaded when it ends
  for (auto& stage : stages) {
    std::map<std::string, at::Tensor> mine;
    for (const std::string& name : stage->state_names())
      if (auto it = state.find(name); it != state.end()) mine.emplace(name, it->second);
    stage->load_whole_state(mine);
  }
}

std::vector<std::unique_ptr<WholeScope>> RankBuild::whole() {
  std::vector<std::unique_ptr<WholeScope>> scopes;
  for (auto& dp : data_parallel) scopes.push_back(dp->whole());
  return scopes;
}

double RankBuild::clip_grad_norm(double max_norm) {
  std::vector<NormShare> shares;
  for (auto& dp : data_parallel)
    for (NormShare& share : dp->norm_shares()) shares.push_back(std::move(share));
  return collectives::clip_grad_norm(shares, max_norm, groups.pipeline.get());
}

std::vector<at::Tensor> RankBuild::held_gradients() {
  std::vector<at::Tensor> all;
  for (auto& dp : data_parallel)
    for (const NormShare& share : dp->norm_shares()) all.insert(all.end(), share.gradients.begin(), share.gradients.end());
  return all;
}

void RankBuild::before_last_backward(int stage) {
  for (size_t c = 0; c < stage_numbers.size(); ++c)
    if (stage_numbers[c] == stage) data_parallel[c]->before_last_backward();
}

RankBuild::Evaluating::Evaluating(RankBuild& rank) : rank_(rank), whole_(rank.whole()) {
  for (auto& stage : rank_.stages) stage->module()->train(false);
}

RankBuild::Evaluating::~Evaluating() {
  for (auto& stage : rank_.stages) stage->module()->train(true);
}

void RankBuild::set_lr(double lr) {
  for (auto& dp : data_parallel) dp->set_lr(lr);
}

void RankBuild::set_aux_loss_scale(double scale) {
  for (auto& stage : stages) stage->set_aux_loss_scale(scale);
}

RankBuild build_rank(const ParallelPlan& plan, comm::Communicator& world, const models::TransformerLmOptions& model,
                     uint64_t seed, double lr) {
  const PlanOptions& o = plan.options();
  RankBuild b;
  b.groups = plan.make_groups(world);
  const Place place = b.groups.place;
  b.roles = plan.roles_of(place);
  b.context = ContextSplit{b.groups.context.get(), o.context.layout, o.context.method};
  for (int s = 0; s < plan.stages(); ++s) b.rank_of_stage.push_back(plan.rank_of_stage(s));
  b.stage_numbers = plan.stages_held(place.stage);
  b.first = b.rank_of_stage.front() == place.stage;
  b.last = b.last_rank() == place.stage;
  b.forwards_together = o.experts.parallel > 1;

  for (const int s : b.stage_numbers) {  // the whole model's initial weights, this rank's stages of them
    b.stages.push_back(std::make_unique<RankStage>(build_stage(model, s, plan.stages(), seed), *b.groups.tensor, b.context));
    b.stages.back()->module()->to(world.device());
  }
  for (auto& stage : b.stages) stage->module()->train(true);
  world.barrier();  // no rank draws dropout masks while another still builds from the shared generator

  for (size_t c = 0; c < b.stages.size(); ++c) {
    comm::Communicator* replicas = &b.groups.averaging();  // data x context
    if (b.stages.size() > 1) {  // every replica splits in the same order: stage by stage
      b.stage_replicas.push_back(
          replicas->split(0, replicas->rank(), replicas->group() + "-stage" + std::to_string(b.stage_numbers[c])));
      replicas = b.stage_replicas.back().get();
    }
    comm::Communicator* copies = nullptr;
    if (o.experts.parallel > 1) {  // layout.hpp's expert groups, split from this stage's averaging group
      const int r = replicas->rank();
      const ExpertPlace e = expert_place(r, o.experts.parallel);
      b.expert_groups.push_back(replicas->split(e.block, r, replicas->group() + "-experts"));
      b.expert_copies.push_back(replicas->split(e.copy, r, replicas->group() + "-expert-copies"));
      b.stages[c]->spread_experts(*b.expert_groups.back());
      copies = b.expert_copies.back().get();
    }
    b.data_parallel.push_back(make_data_parallel(o.data.zero, *replicas, *b.groups.tensor, *b.stages[c], lr, copies));
  }
  return b;
}

}  // namespace distlab::train
