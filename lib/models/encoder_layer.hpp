// torch::nn::TransformerEncoderLayer's forward written out operation by
// operation, in LibTorch's order (post-norm, self-attention without
// need_weights' averaging, which changes no output):
//
//   q, k, v = chunk(linear(src, in_proj)), q scaled by d^-1/2, heads split
//   core    = bmm(dropout(softmax(bmm(q, k^T) + mask)), v)      the attention core
//   x       = norm1(src + dropout1(linear(core, out_proj)))
//   y       = norm2(x + dropout2(linear2(dropout(relu(linear1(x))))))
//
// so that a part of it can be recomputed in the backward
// (memory/recompute.hpp) at the granularities Megatron-LM and torchtitan
// name:
//   kNone       everything kept (equals layer->forward bit for bit)
//   kFull       the whole layer recomputed: only its input kept
//   kSelective  the attention core recomputed (Megatron's selective): q, k
//               and v kept, not the s x s scores, their softmax, dropout
//               mask and dropped weights, the tensors that grow with the
//               square of the sequence
//   kMatmuls    the whole layer recomputed except its matrix products
//               (torchtitan's op-level policy): their outputs kept
//               (memory/products.hpp), the softmax, masks, norms and
//               activations computed again
// Each gives the plain layer's outputs and gradients bit for bit, dropout
// included (the generator's state is saved with the input).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/transformerlayer.h>

#include <functional>

#include "memory/products.hpp"
#include "memory/recompute.hpp"
#include "tensor_parallel/memory.hpp"

namespace distlab::models {

// What replaces linear2(dropout(activation(linear1(x)))) in a layer whose
// feed-forward is a mixture of experts (models/moe_feed_forward.hpp); empty:
// the layer's own.
using FeedForward = std::function<at::Tensor(const at::Tensor&)>;

// src (S, N, E), mask (S, S) float (added) or undefined -> (S, N, E).
// With `feed_forward` (experts), kMatmuls is refused: the experts'
// products do not go through the kept products.
at::Tensor run_encoder_layer(torch::nn::TransformerEncoderLayerImpl& layer, const at::Tensor& src,
                             const at::Tensor& mask, memory::Recompute policy, const FeedForward& feed_forward = {});

// What run_encoder_layer's forward keeps for its backward, in bytes
// (float32; its output counted, its input not: the caller holds that), with
// U = s b h, F = s b f, A = a s^2 b elements and `dropout` whether the
// dropouts run (p > 0, training):
//   kNone       tensor_parallel/memory.hpp's derivation for t = 1:
//               10 U + 3 F + 3 A + 4 s b (no dropout: 6 U + F + A + 4 s b)
//   kSelective  kNone's less the core's A tensors (3 A with dropout: the
//               softmax output, the dropout noise, the dropped weights;
//               1 A without), plus the generator's state
//   kFull       the output U, plus the generator's state
//   kMatmuls    the products' outputs, q k v 3U, the scores A, the core's
//               U, the output projection's U, linear1's F, linear2's U,
//               and the output U: 7 U + F + A, plus the generator's state
// `generator_state`: the bytes of the CPU generator's state a recomputed
// region saves (LibTorch's size, 5056 in 1.13).
int64_t activation_bytes(const tensor_parallel::LayerShape& shape, memory::Recompute policy, bool dropout,
                         int64_t generator_state);

// The layer's pieces, with its products run by `products`.
// q, k, v (N H, S, d), q scaled -> (N H, S, d).
at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                          double dropout, bool training, memory::Products& products);
// The whole layer; the core recomputed when `recompute_core`.
at::Tensor encoder_layer_pieces(torch::nn::TransformerEncoderLayerImpl& layer, const at::Tensor& src,
                                const at::Tensor& mask, memory::Products& products, bool recompute_core,
                                const FeedForward& feed_forward = {});

}  // namespace distlab::models
