#include "models/transformer_lm.hpp"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "models/encoder_layer.hpp"
#include "models/model_unit.hpp"
#include "models/moe_feed_forward.hpp"

namespace distlab::models {

namespace {

constexpr double kInitRange = 0.1;  // the tutorial's initrange

// (S, S) float: 0 where query s may attend to key t (t <= s), -inf above the
// diagonal, as the single-GPU tutorial's generate_square_subsequent_mask.
at::Tensor causal_mask(int64_t s, const at::TensorOptions& options) {
  return at::triu(at::full({s, s}, -std::numeric_limits<float>::infinity(), options), /*diagonal=*/1);
}

}  // namespace

std::vector<std::string> transformer_lm_preset_names() { return {"tiny", "cpu", "tutorial"}; }

TransformerLmOptions transformer_lm_preset(const std::string& name, int64_t ntokens) {
  TransformerLmOptions options;
  options.ntokens = ntokens;
  if (name == "tiny") {
    options.emsize = 32, options.nhid = 64, options.nlayers = 2, options.nhead = 2;
  } else if (name == "cpu") {
    options.emsize = 128, options.nhid = 256, options.nlayers = 4, options.nhead = 4;
  } else if (name == "tutorial") {
    options.emsize = 4096, options.nhid = 4096, options.nlayers = 8, options.nhead = 16;
  } else {
    throw std::invalid_argument("transformer_lm_preset: unknown preset '" + name +
                                "' (hint: one of tiny, cpu, tutorial)");
  }
  return options;
}

TransformerLmImpl::TransformerLmImpl(const TransformerLmOptions& options, int64_t first_layer, int64_t end_layer)
    : options_(options) {
  TORCH_CHECK(options.ntokens > 0, "TransformerLm: ntokens must be positive, got ", options.ntokens,
              " (hint: pass the vocabulary size)");
  TORCH_CHECK(options.emsize > 0 && options.nhead > 0 && options.emsize % options.nhead == 0,
              "TransformerLm: emsize (", options.emsize, ") must be a positive multiple of nhead (", options.nhead,
              ")");
  TORCH_CHECK(options.nhid > 0, "TransformerLm: nhid must be positive, got ", options.nhid);
  check_moe_options(options.moe, "TransformerLm");
  if (options.moe.enabled() && options.recompute == memory::Recompute::kMatmuls)
    throw std::invalid_argument("TransformerLm: recompute matmuls keeps the dense layers' products; with experts "
                                "(their products dispatched apart) use recompute full or selective");
  std::tie(first_layer_, end_layer_) = resolve_layer_range("TransformerLm", options.nlayers, first_layer, end_layer);

  if (has_embedding()) {
    encoder_ = register_module("encoder", torch::nn::Embedding(options.ntokens, options.emsize));
    pos_encoder_ = register_module("pos_encoder", PositionalEncoding(options.emsize, options.dropout, options.max_len));
    torch::NoGradGuard no_grad;
    encoder_->weight.uniform_(-kInitRange, kInitRange);
  }
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named_layers;
  for (int64_t i = first_layer_; i < end_layer_; ++i) {
    torch::nn::TransformerEncoderLayer layer(torch::nn::TransformerEncoderLayerOptions(options.emsize, options.nhead)
                                                 .dim_feedforward(options.nhid)
                                                 .dropout(options.dropout));
    layers_.push_back(layer);
    if (options.moe.enabled()) moes_.push_back(upcycle(*layer, options.moe).ptr());
    named_layers.emplace_back(std::to_string(i), layer.ptr());  // global index: names independent of the split
  }
  register_module("layers", torch::nn::ModuleDict(named_layers));
  if (has_output()) {
    decoder_ = register_module("decoder", torch::nn::Linear(options.emsize, options.ntokens));
    torch::NoGradGuard no_grad;
    decoder_->bias.zero_();
    decoder_->weight.uniform_(-kInitRange, kInitRange);
  }
}

at::Tensor TransformerLmImpl::embed(const at::Tensor& input) {
  TORCH_CHECK(input.dim() == 2 && input.scalar_type() == at::kLong, "TransformerLm stage [", first_layer_, ", ",
              end_layer_, "): the first stage expects int64 tokens (S, N), got ", input.scalar_type(), " of shape ",
              input.sizes(), " (hint: hidden states go to later stages)");
  const at::Tensor positions = positions_ ? positions_(input.size(0)) : at::Tensor();
  const at::Tensor scaled = encoder_(input) * std::sqrt(static_cast<double>(options_.emsize));
  if (!embedding_dropout_) return pos_encoder_->forward(scaled, positions);  // (S, N, d)
  const at::Tensor h = pos_encoder_->add(scaled, positions);
  return is_training() ? embedding_dropout_(h) : h;
}

at::Tensor TransformerLmImpl::check_hidden(const at::Tensor& h) const {
  TORCH_CHECK(h.dim() == 3 && h.is_floating_point() && h.size(2) == options_.emsize, "TransformerLm stage [",
              first_layer_, ", ", end_layer_, "): expected hidden states (S, N, ", options_.emsize, ") float, got ",
              h.scalar_type(), " of shape ", h.sizes(), " (hint: tokens go to the stage that starts at layer 0)");
  return h;
}

at::Tensor TransformerLmImpl::mask_for(const at::Tensor& h) const {
  // By position, my tokens' rows of a mask over the whole sequence: the attention's rule then.
  return options_.causal && !positions_ ? causal_mask(h.size(0), h.options()) : at::Tensor();
}

at::Tensor TransformerLmImpl::decode(const at::Tensor& h) { return decoder_(h); }

std::vector<torch::nn::TransformerEncoderLayer> TransformerLmImpl::release_layers() {
  unregister_module("layers");
  std::vector<torch::nn::TransformerEncoderLayer> out = std::move(layers_);
  layers_.clear();
  return out;
}

void TransformerLmImpl::use_layers(std::vector<std::shared_ptr<torch::nn::Module>> modules, LayerForward forward) {
  TORCH_CHECK(layers_.empty() && modules.size() == static_cast<size_t>(end_layer_ - first_layer_),
              "TransformerLm::use_layers: one module per released layer");
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named;
  for (size_t k = 0; k < modules.size(); ++k) named.emplace_back(std::to_string(first_layer_ + int64_t(k)), modules[k]);
  register_module("layers", torch::nn::ModuleDict(named));
  used_ = std::move(modules);
  run_used_ = std::move(forward);
}

void TransformerLmImpl::set_positions(std::function<at::Tensor(int64_t)> positions) {
  TORCH_CHECK(run_used_, "TransformerLm::set_positions: the layers' attention must apply the causal rule by "
                         "position (use_layers)");
  positions_ = std::move(positions);
}

void TransformerLmImpl::set_embedding_dropout(std::function<at::Tensor(const at::Tensor&)> dropout) {
  embedding_dropout_ = std::move(dropout);
}

size_t TransformerLmImpl::layer_count() const { return run_used_ ? used_.size() : layers_.size(); }

at::Tensor TransformerLmImpl::run_layer(size_t k, const at::Tensor& h) {
  if (run_used_) return run_used_(k, h, mask_for(h));
  if (options_.recompute != memory::Recompute::kNone) {
    FeedForward feed_forward;  // empty: the layer's own
    if (!moes_.empty()) {
      const std::shared_ptr<experts::MoeLayerImpl> moe = moes_[k];
      feed_forward = [moe](const at::Tensor& x) { return moe->forward(x); };
    }
    return run_encoder_layer(*layers_[k], h, mask_for(h), options_.recompute, feed_forward);
  }
  if (!moes_.empty()) return encoder_layer_forward(*layers_[k], *moes_[k], h, mask_for(h));
  return layers_[k](h, mask_for(h));
}

void TransformerLmImpl::set_aux_loss_scale(double scale) {
  for (auto& moe : moes_) moe->set_aux_scale(scale);
}

at::Tensor TransformerLmImpl::forward(const at::Tensor& input) {
  at::Tensor h = has_embedding() ? embed(input) : check_hidden(input);
  for (size_t k = 0; k < layer_count(); ++k) h = run_layer(k, h);
  if (!has_output()) return h;
  return decode(h);  // (S, N, ntokens)
}

torch::nn::Sequential TransformerLmImpl::units() {
  using Parts = ModelUnitImpl::Parts;
  using Function = ModelUnitImpl::Function;
  auto self = std::dynamic_pointer_cast<TransformerLmImpl>(shared_from_this());
  torch::nn::Sequential chain;
  if (has_embedding())
    chain->push_back("embedding", ModelUnit(Parts{{"encoder", encoder_.ptr()}, {"pos_encoder", pos_encoder_.ptr()}},
                                            Function([self](const at::Tensor& x) { return self->embed(x); })));
  for (size_t k = 0; k < layer_count(); ++k) {
    const bool first = !has_embedding() && k == 0;  // takes the previous stage's hidden states: checked
    const Function run([self, k, first](const at::Tensor& h) {
      return self->run_layer(k, first ? self->check_hidden(h) : h);
    });
    chain->push_back("layer" + std::to_string(first_layer_ + static_cast<int64_t>(k)),
                     ModelUnit(Parts{{"layer", run_used_ ? used_[k] : layers_[k].ptr()}}, run));
  }
  if (has_output())
    chain->push_back("decoder", ModelUnit(Parts{{"decoder", decoder_.ptr()}},
                                          Function([self](const at::Tensor& h) { return self->decoder_(h); })));
  return chain;
}

}  // namespace distlab::models
