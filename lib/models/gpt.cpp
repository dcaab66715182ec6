#include "models/gpt.hpp"

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "models/moe_feed_forward.hpp"

namespace distlab::models {

GptImpl::GptImpl(const GptOptions& options, int64_t first_layer, int64_t end_layer) : options_(options) {
  TORCH_CHECK(options.dim > 0 && options.n_heads > 0 && options.dim % options.n_heads == 0,
              "Gpt: dim (", options.dim, ") must be a positive multiple of n_heads (", options.n_heads,
              ") (hint: each head gets dim / n_heads features)");
  TORCH_CHECK(options.vocab_size > 0 && options.ffn_dim > 0, "Gpt: vocab_size (", options.vocab_size,
              ") and ffn_dim (", options.ffn_dim, ") must be positive");
  check_moe_options(options.moe, "Gpt");
  std::tie(first_layer_, end_layer_) = resolve_layer_range("Gpt", options.n_layers, first_layer, end_layer);

  // Registration order follows the tutorial's __init__, so named_parameters()
  // lists a stage's names in the whole model's order.
  if (has_embedding())
    tok_embeddings_ = register_module("tok_embeddings", torch::nn::Embedding(options.vocab_size, options.dim));
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named_layers;
  for (int64_t i = first_layer_; i < end_layer_; ++i) {
    torch::nn::TransformerDecoderLayer layer(torch::nn::TransformerDecoderLayerOptions(options.dim, options.n_heads)
                                                 .dim_feedforward(options.ffn_dim)
                                                 .dropout(options.dropout));
    layers_.push_back(layer);
    if (options.moe.enabled()) moes_.push_back(upcycle(*layer, options.moe).ptr());
    // Keyed by the global layer index, as the tutorial's ModuleDict after `del`.
    named_layers.emplace_back(std::to_string(i), layer.ptr());
  }
  register_module("layers", torch::nn::ModuleDict(named_layers));
  if (has_output()) {
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.dim})));
    output_ = register_module("output", torch::nn::Linear(options.dim, options.vocab_size));
  }
}

at::Tensor GptImpl::forward(const at::Tensor& input) {
  at::Tensor h;
  if (has_embedding()) {
    TORCH_CHECK(input.dim() == 2 && input.scalar_type() == at::kLong,
                "Gpt stage [", first_layer_, ", ", end_layer_, "): the first stage expects int64 tokens (A, B), got ",
                input.scalar_type(), " of shape ", input.sizes(), " (hint: hidden states go to later stages)");
    h = tok_embeddings_(input);  // (A, B, dim)
  } else {
    TORCH_CHECK(input.dim() == 3 && input.is_floating_point() && input.size(2) == options_.dim,
                "Gpt stage [", first_layer_, ", ", end_layer_, "): expected hidden states (A, B, ", options_.dim,
                ") float, got ", input.scalar_type(), " of shape ", input.sizes(),
                " (hint: tokens go to the stage that starts at layer 0)");
    h = input;
  }
  // The tutorial's layer(h, h): the layer's "memory" is its own input, so
  // cross-attention attends over the same sequence as self-attention.
  for (size_t k = 0; k < layers_.size(); ++k)
    h = moes_.empty() ? layers_[k](h, h) : decoder_layer_forward(*layers_[k], *moes_[k], h, h);
  if (!has_output()) return h;
  return output_(norm_(h)).to(at::kFloat);  // (A, B, vocab_size)
}

void GptImpl::set_aux_loss_scale(double scale) {
  for (auto& moe : moes_) moe->set_aux_scale(scale);
}

}  // namespace distlab::models
