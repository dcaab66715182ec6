#include "train/cut_layers.hpp"

#include <memory>
#include <stdexcept>

#include "experts/moe.hpp"
#include "memory/recompute.hpp"

namespace distlab::train {

CutLayers::CutLayers(models::TransformerLm& stage, comm::Communicator& tensor) {
  const models::TransformerLmOptions& options = stage->options();
  if (options.recompute == memory::Recompute::kMatmuls)
    throw std::invalid_argument("CutLayers: recompute matmuls keeps the products of a whole layer "
                                "(models/encoder_layer.hpp); a cut layer recomputes full or selective (the plan's rule)");
  const auto moes = stage->moes();  // a layer's experts: whole on every rank, on its own tokens
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  int64_t index = stage->first_layer();
  for (const torch::nn::TransformerEncoderLayer& full : stage->release_layers()) {
    layers_.emplace_back(tensor, full);
    if (!moes.empty()) {
      const std::shared_ptr<experts::MoeLayerImpl> moe = moes[layers_.size() - 1];
      layers_.back()->set_feed_forward([moe](const at::Tensor& x) { return moe->forward(x); });
    }
    if (options.recompute == memory::Recompute::kSelective) layers_.back()->self_attn->set_recompute_core(true);
    prefixes_.push_back("layers." + std::to_string(index++) + ".");
    modules.push_back(layers_.back().ptr());
  }
  const bool full = options.recompute == memory::Recompute::kFull;
  stage->use_layers(modules, [layers = layers_, full](size_t k, const at::Tensor& h, const at::Tensor& mask) {
    const std::shared_ptr<tensor_parallel::ParallelEncoderLayerImpl> layer = layers[k].ptr();
    if (!full) return layer->forward(h, mask);
    // The whole layer again in the backward, its collectives with it (each
    // rank of the group recomputes in the same order), its alike masks
    // drawn again from the state they had.
    return memory::checkpoint([layer, mask](const at::Tensor& x) { return layer->forward(x, mask); }, h,
                              layer->own_generators());
  });
  if (options.dropout > 0 && stage->has_embedding()) {
    at::Generator alike = tensor_parallel::generator_alike(stage->named_parameters()["encoder.weight"]);
    const double p = options.dropout;
    stage->set_embedding_dropout(
        [alike, p](const at::Tensor& h) mutable { return tensor_parallel::dropout_alike(h, p, alike); });
  }
}

bool CutLayers::holds(const std::string& name) const {
  for (const std::string& prefix : prefixes_)
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

std::map<std::string, at::Tensor> CutLayers::whole_state(bool gradients) {
  std::map<std::string, at::Tensor> state;
  for (size_t k = 0; k < layers_.size(); ++k)
    for (auto& [name, tensor] : layers_[k]->whole_state(gradients)) state[prefixes_[k] + name] = tensor;
  return state;
}

void CutLayers::load_whole_state(const std::map<std::string, at::Tensor>& whole) {
  for (size_t k = 0; k < layers_.size(); ++k) {
    std::map<std::string, at::Tensor> mine;
    for (const auto& [name, tensor] : whole)
      if (name.rfind(prefixes_[k], 0) == 0) mine[name.substr(prefixes_[k].size())] = tensor;
    layers_[k]->load_whole_state(mine);
  }
}

std::vector<at::Tensor> CutLayers::split_parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& layer : layers_)
    for (const tensor_parallel::Piece& piece : layer->pieces())
      if (piece.cut != tensor_parallel::Cut::kWhole) out.insert(out.end(), piece.parts.begin(), piece.parts.end());
  return out;
}

}  // namespace distlab::train
