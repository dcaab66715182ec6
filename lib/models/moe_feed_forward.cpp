#include "models/moe_feed_forward.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <tuple>

#include "tensor_parallel/layer.hpp"

namespace distlab::models {
namespace {

template <typename LayerImpl>
experts::MoeLayer upcycle_layer(LayerImpl& layer, const MoeFeedForwardOptions& options, const std::string& who) {
  if (layer.options.activation().index() != 0)
    throw std::invalid_argument(who + ": experts are relu MLPs; this layer's activation is not relu");
  const int64_t E = options.experts;
  at::Tensor w1, b1, w2, b2;
  {
    at::NoGradGuard no_grad;  // E copies of linear1 (ffn, d) and linear2 (d, ffn), transposed: x W1 + b1
    w1 = layer.linear1->weight.detach().t().unsqueeze(0).repeat({E, 1, 1});
    b1 = layer.linear1->bias.detach().unsqueeze(0).repeat({E, 1});
    w2 = layer.linear2->weight.detach().t().unsqueeze(0).repeat({E, 1, 1});
    b2 = layer.linear2->bias.detach().unsqueeze(0).repeat({E, 1});
  }
  experts::MoeOptions moe;
  moe.experts = E, moe.top_k = options.top_k, moe.capacity_factor = options.capacity_factor;
  // The router from a generator seeded by this layer's own weights: the same
  // on every rank, with no draw from the default generator (the model's other
  // parameters are the dense model's of the same seed).
  at::Generator generator = tensor_parallel::generator_alike(layer.linear1->weight);
  experts::Router router(layer.linear1->weight.size(1), E, options.top_k, /*normalize=*/false, generator);
  experts::MoeLayer layer_moe(router, experts::ExpertMlps(w1, b1, w2, b2), moe, nullptr, options.balance_coefficient,
                              options.z_coefficient);
  layer_moe->set_aux_scale(1.0);
  layer.unregister_module("linear1");
  layer.unregister_module("linear2");
  layer.linear1 = nullptr;
  layer.linear2 = nullptr;
  return layer.register_module("moe", layer_moe);
}

at::Tensor attend(torch::nn::MultiheadAttention& attention, const at::Tensor& q, const at::Tensor& kv,
                  const at::Tensor& mask) {
  return std::get<0>(attention->forward(q, kv, kv, /*key_padding_mask=*/{}, /*need_weights=*/false, mask));
}

}  // namespace

void check_moe_options(const MoeFeedForwardOptions& o, const std::string& who) {
  if (o.experts < 0) throw std::invalid_argument(who + ": --experts must be 0 (dense) or more, got " + std::to_string(o.experts));
  if (!o.enabled()) return;
  if (o.top_k < 1 || o.top_k > o.experts)
    throw std::invalid_argument(who + ": --top-k " + std::to_string(o.top_k) + " must be in [1, " +
                                std::to_string(o.experts) + "] (the experts)");
  if (o.balance_coefficient < 0 || o.z_coefficient < 0)
    throw std::invalid_argument(who + ": the auxiliary losses' coefficients must not be negative");
}

experts::MoeLayer upcycle(torch::nn::TransformerEncoderLayerImpl& layer, const MoeFeedForwardOptions& options) {
  return upcycle_layer(layer, options, "TransformerLm");
}

experts::MoeLayer upcycle(torch::nn::TransformerDecoderLayerImpl& layer, const MoeFeedForwardOptions& options) {
  return upcycle_layer(layer, options, "Gpt");
}

at::Tensor encoder_layer_forward(torch::nn::TransformerEncoderLayerImpl& layer, experts::MoeLayerImpl& moe,
                                 const at::Tensor& src, const at::Tensor& src_mask) {
  const at::Tensor x = layer.norm1(src + layer.dropout1(attend(layer.self_attn, src, src, src_mask)));
  return layer.norm2(x + layer.dropout2(moe.forward(x)));
}

at::Tensor decoder_layer_forward(torch::nn::TransformerDecoderLayerImpl& layer, experts::MoeLayerImpl& moe,
                                 const at::Tensor& tgt, const at::Tensor& memory) {
  at::Tensor x = layer.norm1(tgt + layer.dropout1(attend(layer.self_attn, tgt, tgt, {})));
  x = layer.norm2(x + layer.dropout2(attend(layer.multihead_attn, x, memory, {})));
  return layer.norm3(x + layer.dropout3(moe.forward(x)));
}

}  // namespace distlab::models
