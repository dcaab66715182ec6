// The encoder layer written out, with its recomputation policies
// (models/encoder_layer.hpp).
#include "models/encoder_layer.hpp"

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>

#include "compat/torch.hpp"

#include <cmath>
#include <memory>
#include <stdexcept>

namespace distlab::models {

at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                          double dropout, bool training, memory::Products& products) {
  at::Tensor scores = products.bmm(q, k.transpose(1, 2));  // (N H, S, S)
  // Out of place, so that a kept product stays what the product computed.
  // LibTorch adds in place: in the scores' type (bf16 under mixed
  // precision) from a sum done in the wider of the two; so here.
  if (mask.defined()) {
    const at::ScalarType type = scores.scalar_type();
    scores = (scores.to(at::promote_types(type, mask.scalar_type())) + mask.unsqueeze(0)).to(type);
  }
  const at::Tensor weights = at::dropout(at::softmax(scores, -1), dropout, training);
  return products.bmm(weights, v);
}

at::Tensor encoder_layer_pieces(torch::nn::TransformerEncoderLayerImpl& layer, const at::Tensor& src,
                                const at::Tensor& mask, memory::Products& products, bool recompute_core,
                                const FeedForward& feed_forward) {
  torch::nn::MultiheadAttentionImpl& mha = *layer.self_attn;
  const int64_t s = src.size(0), n = src.size(1), e = src.size(2), h = mha.options.num_heads(), d = e / h;
  const double scaling = 1 / std::sqrt(d);  // as LibTorch computes it
  const std::vector<at::Tensor> qkv = products.linear(src, mha.in_proj_weight, mha.in_proj_bias).chunk(3, -1);
  const auto heads = [&](const at::Tensor& t) { return t.contiguous().view({-1, n * h, d}).transpose(0, 1); };
  const at::Tensor q = heads(qkv[0] * scaling), k = heads(qkv[1]), v = heads(qkv[2]);
  const double p = mha.options.dropout();
  const bool training = mha.is_training();
  at::Tensor core;
  if (recompute_core) {
    core = memory::checkpoint(
        [mask, p, training](const memory::Tensors& in) {
          return memory::Tensors{attention_core(in[0], in[1], in[2], mask, p, training, memory::plain_products())};
        },
        {q, k, v})[0];
  } else {
    core = attention_core(q, k, v, mask, p, training, products);
  }
  const at::Tensor mixed = core.transpose(0, 1).contiguous().view({s, n, e});
  const at::Tensor attended = products.linear(mixed, mha.out_proj->weight, mha.out_proj->bias);
  const at::Tensor x = layer.norm1(src + layer.dropout1(attended));
  if (feed_forward) return layer.norm2(x + layer.dropout2(feed_forward(x)));
  const auto& activation = layer.options.activation();
  at::Tensor wide = products.linear(x, layer.linear1->weight, layer.linear1->bias);
  if (compat::get_if<torch::enumtype::kGELU>(&activation)) {
    wide = torch::nn::functional::gelu(wide);
  } else if (compat::get_if<torch::enumtype::kReLU>(&activation)) {
    wide = torch::nn::functional::relu(wide);
  } else {
    throw std::invalid_argument("run_encoder_layer: the layer's activation must be relu or gelu");
  }
  const at::Tensor y = products.linear(layer.dropout(wide), layer.linear2->weight, layer.linear2->bias);
  return layer.norm2(x + layer.dropout2(y));
}

int64_t activation_bytes(const tensor_parallel::LayerShape& shape, memory::Recompute policy, bool dropout,
                         int64_t generator_state, memory::Precision precision) {
  const int64_t u = shape.seq * shape.batch * shape.hidden, f = shape.seq * shape.batch * shape.ffn,
                a = shape.heads * shape.seq * shape.seq * shape.batch, h = shape.hidden;
  const int64_t k = dropout ? 3 : 1, noise = dropout ? 2 * u : 0;
  if (precision == memory::Precision::kFp16)
    throw std::invalid_argument("activation_bytes: fp16 on the CPU is emulated in float32 tensors "
                                "(memory/fp16_emulation.hpp); its bytes are not derived here");
  const bool low = precision != memory::Precision::kFp32;
  const int64_t l = low ? 2 : 4;  // the products' bytes an element
  const int64_t none = low ? 4 * (3 * u + 4 * shape.seq * shape.batch) +
                                 l * (6 * u + k * f + k * a + noise + 4 * h * h + 2 * h * shape.ffn)
                           : tensor_parallel::distlab_activation_bytes(shape, 1, false, dropout).total();
  switch (policy) {
    case memory::Recompute::kNone: return none;
    case memory::Recompute::kSelective: return none - l * k * a + generator_state;
    case memory::Recompute::kFull: return 4 * u + generator_state;
    case memory::Recompute::kMatmuls: return l * (6 * u + f + a) + 4 * u + generator_state;
  }
  return 0;
}

at::Tensor run_encoder_layer(torch::nn::TransformerEncoderLayerImpl& layer, const at::Tensor& src,
                             const at::Tensor& mask, memory::Recompute policy, const FeedForward& feed_forward) {
  using memory::Recompute;
  if (policy == Recompute::kMatmuls && feed_forward)
    throw std::invalid_argument("run_encoder_layer: recompute matmuls keeps the layer's own products; with "
                                "experts (their products dispatched apart) use full or selective");
  const FeedForward& ff = feed_forward;
  memory::Products& plain = memory::plain_products();
  switch (policy) {
    case Recompute::kNone: return encoder_layer_pieces(layer, src, mask, plain, false, ff);
    case Recompute::kSelective: return encoder_layer_pieces(layer, src, mask, plain, true, ff);
    case Recompute::kFull:
      return memory::checkpoint(
          [&layer, mask, ff](const at::Tensor& x) {
            return encoder_layer_pieces(layer, x, mask, memory::plain_products(), false, ff);
          },
          src);
    case Recompute::kMatmuls: {
      // One set of kept products per forward: filled by the first run,
      // emptied by the recomputation.
      auto kept = std::make_shared<memory::KeptProducts>();
      return memory::checkpoint(
          [&layer, mask, kept](const at::Tensor& x) {
            at::Tensor out = encoder_layer_pieces(layer, x, mask, *kept, false);
            if (c10::GradMode::is_enabled()) kept->clear();  // the recomputation took them back
            return out;
          },
          src);
    }
  }
  throw std::invalid_argument("run_encoder_layer: unknown recomputation policy");
}

}  // namespace distlab::models
