#include "train/stage_model.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <mutex>
#include <stdexcept>

#include "experts/moe.hpp"
#include "experts/trace_counts.hpp"
#include "models/copy_state.hpp"
#include "models/split.hpp"
#include "checkpoint/module_state.hpp"
#include "tensor_parallel/naive.hpp"

namespace distlab::train {

models::TransformerLm build_stage(const models::TransformerLmOptions& options, int stage, int stages, uint64_t seed) {
  if (stages < 1 || stages > options.nlayers || stage < 0 || stage >= stages)
    throw std::invalid_argument("build_stage: stage " + std::to_string(stage) + " of " + std::to_string(stages) +
                                " of a model of " + std::to_string(options.nlayers) +
                                " layers (each stage holds at least one: the plan's rule)");
  const auto [first, end] = models::split_layers(options.nlayers, stages)[static_cast<size_t>(stage)];
  static std::mutex generator_mutex;  // one default generator for all thread ranks
  std::lock_guard<std::mutex> lock(generator_mutex);
  if (models::count_parameters(options) > kWholeModelInitLimit) {
    torch::manual_seed(seed + static_cast<uint64_t>(stage));
    return models::TransformerLm(options, first, end);
  }
  torch::manual_seed(seed);
  models::TransformerLm whole(options);
  models::TransformerLm part(options, first, end);
  if (stages > 1) models::copy_state_by_name(*whole, *part);
  return stages > 1 ? part : whole;
}

RankStage::RankStage(models::TransformerLm unsplit, comm::Communicator& tensor, ContextSplit context)
    : tensor_(tensor), lm_(std::move(unsplit)) {
  for (const auto& [name, tensor_of] : checkpoint::named_state(*lm_))
    shapes_[name] = at::empty(tensor_of.sizes(), tensor_of.options().device(at::kMeta));
  // Tensor, then context: a context split runs in cut layers' attention (a tensor group of one, if need be).
  if (tensor.size() > 1 || context.active()) cut_ = CutLayers(lm_, tensor);
  if (context.active()) split_sequences(lm_, cut_, context);
}

at::Tensor RankStage::forward(const at::Tensor& x) { return lm_->forward(x); }

std::shared_ptr<torch::nn::Module> RankStage::module() const { return lm_.ptr(); }

pipeline::StageModule RankStage::stage() const { return pipeline::stage_of(lm_); }

torch::nn::Sequential RankStage::units() { return lm_->units(); }

std::vector<at::Tensor> RankStage::parameters() const { return module()->parameters(); }

namespace {

bool is_expert(const std::string& name) { return name.find(".moe.experts.") != std::string::npos; }

}  // namespace

void RankStage::spread_experts(comm::Communicator& experts) {
  if (lm_->moes().empty())
    throw std::invalid_argument("RankStage::spread_experts: a stage with experts only (ParallelPlan's rules)");
  for (const auto& moe : lm_->moes()) moe->spread_over(experts);  // cut layers run these same experts
  experts_ = &experts;
}

void RankStage::record_expert_counts(trace::Recorder* recorder, int rank) {
  const auto& moes = lm_->moes();
  for (size_t k = 0; k < moes.size(); ++k)
    experts::record_tokens_per_expert(recorder, rank, "layer " + std::to_string(lm_->first_layer() + int64_t(k)),
                                      moes[k]->take_step_counts());
}

void RankStage::set_aux_loss_scale(double scale) { lm_->set_aux_loss_scale(scale); }

// The placements' gathers: cut layers over the tensor group, spread experts
// over the expert group, each slice in its rank's order; replicated tensors
// as they are.
std::map<std::string, at::Tensor> RankStage::gathered(bool gradients) {
  std::map<std::string, at::Tensor> named = cut_.whole_state(gradients);
  for (const PlacedParameter& p : placed_parameters()) {
    const at::Tensor mine = tensor_parallel::value_or_gradient(p.tensor, gradients);
    if (p.placement == Placement::kSpread)  // in a cut layer too: its experts are whole on each tensor rank
      named[p.name] = tensor_parallel::gather_parts(*experts_, mine, 0);
    else if (!cut_.holds(p.name))
      named[p.name] = mine;
  }
  return named;
}

std::map<std::string, at::Tensor> RankStage::whole_parameters() { return gathered(/*gradients=*/false); }

std::map<std::string, at::Tensor> RankStage::whole_gradients() { return gathered(/*gradients=*/true); }

std::map<std::string, at::Tensor> RankStage::whole_state() {
  std::map<std::string, at::Tensor> state = whole_parameters();
  for (const auto& item : lm_->named_buffers()) state[item.key()] = item.value();  // the positional table
  return state;
}

// The other way: the state checked against the unsplit stage's names and
// shapes, this rank's slice of each spread expert kept, the cut layers cut,
// everything else copied.
void RankStage::load_whole_state(const std::map<std::string, at::Tensor>& state) {
  checkpoint::check_state_fits(shapes_, state);
  std::map<std::string, at::Tensor> mine = state;
  if (experts_ != nullptr) {
    const int G = experts_->size();
    for (const std::string& name : names_placed(Placement::kSpread)) {
      at::Tensor& tensor = mine.at(name);
      tensor = tensor.narrow(0, experts_->rank() * (tensor.size(0) / G), tensor.size(0) / G);
    }
  }
  cut_.load_whole_state(mine);
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : checkpoint::named_state(*lm_))
    if (!cut_.holds(name)) tensor.copy_(mine.at(name));
}

std::set<std::string> RankStage::state_names() const {
  std::set<std::string> names;
  for (const auto& item : shapes_) names.insert(item.first);
  return names;
}

const char* placement_name(Placement placement) {
  switch (placement) {
    case Placement::kReplicated: return "replicated";
    case Placement::kCut: return "cut";
    case Placement::kSpread: return "spread";
  }
  return "?";
}

std::vector<PlacedParameter> RankStage::placed_parameters() const {
  std::set<const c10::TensorImpl*> cut;
  for (const at::Tensor& p : cut_.split_parameters()) cut.insert(p.unsafeGetTensorImpl());
  std::vector<PlacedParameter> out;
  for (const auto& item : module()->named_parameters()) {
    const Placement placement = cut.count(item.value().unsafeGetTensorImpl()) ? Placement::kCut
                                : experts_ != nullptr && is_expert(item.key()) ? Placement::kSpread
                                                                               : Placement::kReplicated;
    out.push_back({item.key(), item.value(), placement});
  }
  return out;
}

std::vector<at::Tensor> tensors_placed(const std::vector<PlacedParameter>& held, Placement placement) {
  std::vector<at::Tensor> out;
  for (const PlacedParameter& p : held)
    if (p.placement == placement) out.push_back(p.tensor);
  return out;
}

std::vector<at::Tensor> RankStage::parameters_placed(Placement placement) const {
  return tensors_placed(placed_parameters(), placement);
}

std::set<std::string> RankStage::names_placed(Placement placement) const {
  std::set<std::string> out;
  for (const PlacedParameter& p : placed_parameters())
    if (p.placement == placement) out.insert(p.name);
  return out;
}

comm::Communicator* RankStage::group_of(Placement placement) const {
  switch (placement) {
    case Placement::kReplicated: return nullptr;
    case Placement::kCut: return tensor_.size() > 1 ? &tensor_ : nullptr;
    case Placement::kSpread: return experts_;
  }
  return nullptr;
}

}  // namespace distlab::train
