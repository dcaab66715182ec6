#include "train/tensor_stage.hpp"

#include <torch/nn/modules/container/moduledict.h>

#include <memory>
#include <stdexcept>

#include "context_parallel/ring_attention.hpp"
#include "experts/moe.hpp"
#include "memory/recompute.hpp"
#include "models/model_unit.hpp"

namespace distlab::train {

at::Tensor ContextSplit::positions(int64_t local) const {
  if (!active()) return at::arange(local, at::kLong);
  return context_parallel::positions_of(layout, local * group->size(), group->size(), group->rank());
}

TensorParallelStageImpl::TensorParallelStageImpl(comm::Communicator& tensor, models::TransformerLm unsplit,
                                                 ContextSplit context)
    : tensor_(tensor), context_(context), unsplit_(std::move(unsplit)) {
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named;
  int64_t index = unsplit_->first_layer();
  const auto moes = unsplit_->moes();  // a layer's experts: whole on every rank, on its own tokens
  for (const torch::nn::TransformerEncoderLayer& full : unsplit_->release_layers()) {
    layers_.emplace_back(tensor, full);
    if (!moes.empty()) {
      const std::shared_ptr<experts::MoeLayerImpl> moe = moes[layers_.size() - 1];
      layers_.back()->set_feed_forward([moe](const at::Tensor& x) { return moe->forward(x); });
    }
    indices_.push_back(index);
    named.emplace_back(std::to_string(index++), layers_.back().ptr());
  }
  // The embedding, positional table and decoder as the unsplit stage names them.
  for (const auto& item : unsplit_->named_children()) register_module(item.key(), item.value());
  register_module("layers", torch::nn::ModuleDict(named));
  if (unsplit_->options().dropout > 0 && unsplit_->has_embedding())
    alike_ = tensor_parallel::generator_alike(unsplit_->named_parameters()["encoder.weight"]);
  const memory::Recompute recompute = unsplit_->options().recompute;
  if (recompute == memory::Recompute::kMatmuls)
    throw std::invalid_argument("tensor-parallel stage: recompute matmuls keeps the products of a whole layer "
                                "(models/encoder_layer.hpp); a cut layer recomputes full or selective (the plan's rule)");
  if (recompute == memory::Recompute::kSelective)
    for (auto& layer : layers_) layer->self_attn->set_recompute_core(true);
  if (!context_.active()) return;
  // Each layer's attention core: my heads' q, k, v for my tokens, attended
  // to the whole sequence across the context group.
  const ContextSplit split = context_;
  const bool causal = unsplit_->options().causal;
  for (auto& layer : layers_) {
    const int64_t heads = layer->self_attn->heads();
    layer->self_attn->set_core([split, causal, heads](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      const int64_t local = q.size(1), d = q.size(2);
      // (N H, L, d) -> (N, H, L, d): heads at dimension -3 (Ulysses exchanges them).
      auto by_head = [&](const at::Tensor& x) { return x.reshape({-1, heads, local, d}); };
      const at::Tensor out = context_parallel::context_attention(*split.group, split.method, by_head(q), by_head(k),
                                                                 by_head(v), /*scale=*/1.0, split.positions(local),
                                                                 causal);  // q arrives scaled
      return out.reshape({-1, local, d});
    });
  }
}

at::Tensor TensorParallelStageImpl::enter(const at::Tensor& input) {
  if (!unsplit_->has_embedding()) return unsplit_->check_hidden(input);
  // Under context parallelism my tokens sit at their own places in the sequence.
  const at::Tensor positions = context_.active() ? context_.positions(input.size(0)) : at::Tensor();
  if (!alike_.defined()) return unsplit_->embed(input, /*dropout=*/true, positions);
  const at::Tensor h = unsplit_->embed(input, /*dropout=*/false, positions);  // the encoding's dropout, drawn alike
  return is_training() ? tensor_parallel::dropout_alike(h, unsplit_->options().dropout, alike_) : h;
}

at::Tensor TensorParallelStageImpl::run_layer(size_t k, const at::Tensor& h) {
  // The context core applies the causal rule by position; a mask over my S/C rows would be wrong.
  const at::Tensor mask = context_.active() ? at::Tensor() : unsplit_->mask_for(h);
  if (unsplit_->options().recompute != memory::Recompute::kFull) return layers_[k](h, mask);
  // The whole layer again in the backward, its collectives with it (each
  // rank of the group recomputes in the same order), its alike masks drawn
  // again from the state they had.
  const std::shared_ptr<tensor_parallel::ParallelEncoderLayerImpl> layer = layers_[k].ptr();
  return memory::checkpoint([layer, mask](const at::Tensor& x) { return layer->forward(x, mask); }, h,
                            layer->own_generators());
}

at::Tensor TensorParallelStageImpl::forward(const at::Tensor& input) {
  at::Tensor h = enter(input);
  for (size_t k = 0; k < layers_.size(); ++k) h = run_layer(k, h);
  return unsplit_->has_output() ? unsplit_->decode(h) : h;
}

torch::nn::Sequential TensorParallelStageImpl::units() {
  using models::ModelUnit;
  using Parts = models::ModelUnitImpl::Parts;
  using Function = models::ModelUnitImpl::Function;
  auto self = std::dynamic_pointer_cast<TensorParallelStageImpl>(shared_from_this());
  std::map<std::string, std::shared_ptr<torch::nn::Module>> part;  // the unsplit stage's embedding and decoder
  for (const auto& item : unsplit_->named_children()) part[item.key()] = item.value();
  torch::nn::Sequential chain;
  if (unsplit_->has_embedding())
    chain->push_back("embedding", ModelUnit(Parts{{"encoder", part.at("encoder")}, {"pos_encoder", part.at("pos_encoder")}},
                                            Function([self](const at::Tensor& x) { return self->enter(x); })));
  for (size_t k = 0; k < layers_.size(); ++k) {
    const bool first = !unsplit_->has_embedding() && k == 0;  // takes the previous stage's hidden states: checked
    const Function run([self, k, first](const at::Tensor& x) {
      return self->run_layer(k, first ? self->enter(x) : x);
    });
    chain->push_back("layer" + std::to_string(indices_[k]), ModelUnit(Parts{{"layer", layers_[k].ptr()}}, run));
  }
  if (unsplit_->has_output())
    chain->push_back("decoder", ModelUnit(Parts{{"decoder", part.at("decoder")}},
                                          Function([self](const at::Tensor& h) { return self->unsplit_->decode(h); })));
  return chain;
}

std::map<std::string, at::Tensor> TensorParallelStageImpl::whole_state(bool gradients) {
  std::map<std::string, at::Tensor> state;
  for (const auto& item : unsplit_->named_parameters())
    state[item.key()] = tensor_parallel::value_or_gradient(item.value(), gradients).clone();
  for (size_t k = 0; k < layers_.size(); ++k)
    for (auto& [name, tensor] : layers_[k]->whole_state(gradients))
      state["layers." + std::to_string(indices_[k]) + "." + name] = tensor;
  return state;
}

void TensorParallelStageImpl::load_whole_state(const std::map<std::string, at::Tensor>& whole) {
  at::NoGradGuard no_grad;
  for (auto& item : unsplit_->named_parameters()) {
    const auto found = whole.find(item.key());
    if (found == whole.end()) throw std::invalid_argument("tensor-parallel stage: no '" + item.key() + "' to load");
    item.value().copy_(found->second);
  }
  for (size_t k = 0; k < layers_.size(); ++k) {
    const std::string prefix = "layers." + std::to_string(indices_[k]) + ".";
    std::map<std::string, at::Tensor> mine;
    for (const auto& [name, tensor] : whole)
      if (name.rfind(prefix, 0) == 0) mine[name.substr(prefix.size())] = tensor;
    layers_[k]->load_whole_state(mine);
  }
}

std::vector<at::Tensor> TensorParallelStageImpl::replicated_parameters() const {
  std::vector<at::Tensor> out = unsplit_->parameters();
  for (const auto& layer : layers_)
    for (const at::Tensor& p : layer->replicated_parameters()) out.push_back(p);
  return out;
}

std::vector<at::Tensor> TensorParallelStageImpl::split_parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& layer : layers_)
    for (const tensor_parallel::Piece& piece : layer->pieces())
      if (piece.cut != tensor_parallel::Cut::kWhole) out.insert(out.end(), piece.parts.begin(), piece.parts.end());
  return out;
}

}  // namespace distlab::train
