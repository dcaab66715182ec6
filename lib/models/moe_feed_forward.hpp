// The seed models' feed-forward as a mixture of experts (--experts E
// --top-k k --capacity-factor c): each layer's linear1 -> relu -> linear2
// becomes a router and E experts of the same shape (lib/experts), the rest
// of the layer as it was:
//
//   encoder (TransformerLm):  x = norm1(src + dropout1(self_attn(src)))
//                             y = norm2(x + dropout2(moe(x)))
//   decoder (Gpt):            x = norm1(tgt + dropout1(self_attn(tgt)))
//                             x = norm2(x + dropout2(multihead_attn(x, memory)))
//                             y = norm3(x + dropout3(moe(x)))
//
// The experts start as copies of the layer's dense linear1 and linear2
// (sparse upcycling, Komatsuzaki et al. 2022): the model begins where the
// dense one does, and with one expert (its router's softmax is 1) it is the
// dense model, which the tests check. The router is drawn from a generator
// seeded by the layer's weights (the same on every rank, and the default
// generator untouched: the rest of the model is the dense one of the same
// seed). The dense pair is unregistered and
// released: it is neither trained nor saved. The experts have no inner
// dropout (the dense feed-forward's `dropout` has no counterpart).
//
// Parameter names: layers.<i>.moe.router.weight (E, d),
// layers.<i>.moe.experts.w1 (E, d, ffn), .b1, .w2 (E, ffn, d), .b2.
//
// The auxiliary losses (balancing, z) join each layer's backward
// (experts/aux_loss.hpp) times the model's aux scale: 1 for a model trained
// on whole batches, 1/M when a step is the mean of M microbatches.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/transformerlayer.h>

#include "experts/moe.hpp"
#include "models/moe_options.hpp"

namespace distlab::models {

// The layer's feed-forward replaced as above: "moe" registered in `layer`,
// its linear1 and linear2 unregistered and released. relu layers only;
// `options` as check_moe_options() passed them (the models check first).
experts::MoeLayer upcycle(torch::nn::TransformerEncoderLayerImpl& layer, const MoeFeedForwardOptions& options);
experts::MoeLayer upcycle(torch::nn::TransformerDecoderLayerImpl& layer, const MoeFeedForwardOptions& options);

// The layers' forward with `moe` as their feed-forward (see above).
at::Tensor encoder_layer_forward(torch::nn::TransformerEncoderLayerImpl& layer, experts::MoeLayerImpl& moe,
                                 const at::Tensor& src, const at::Tensor& src_mask = {});
at::Tensor decoder_layer_forward(torch::nn::TransformerDecoderLayerImpl& layer, experts::MoeLayerImpl& moe,
                                 const at::Tensor& tgt, const at::Tensor& memory);

}  // namespace distlab::models
