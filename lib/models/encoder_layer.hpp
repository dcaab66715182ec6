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

#include "memory/precision.hpp"
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

// What run_encoder_layer's forward keeps for its backward, in bytes (its
// output counted, its input not: the caller holds that), with U = s b h,
// F = s b f, A = a s^2 b elements, k = 3 when the dropouts run (p > 0,
// training: a noise tensor and the dropped tensor beside the softmax's and
// relu's outputs), 1 otherwise, and d = 2 U more noise with them.
// In float32 (4 bytes an element):
//   kNone       tensor_parallel/memory.hpp's derivation for t = 1:
//               4 (4U + kF + kA) inside the attention and MLP, and
//               4 (2U + U + U + d + 4 s b) outside: the norms' inputs, x
//               (linear1's input), the output, the noises, the norms'
//               statistics
//   kSelective  kNone's less the core's k A tensors, plus the generator's
//               state
//   kFull       the output 4U, plus the generator's state
//   kMatmuls    the products' outputs, q k v 3U, the scores A, the core's
//               U, the output projection's U, linear1's F, linear2's U,
//               and the output U: 4 (7U + F + A), plus the generator's state
// With bf16 products (LibTorch's CPU autocast, memory/precision.hpp; l = 2
// bytes) every tensor a product reads or makes is an l-byte one: the
// inside 4U + kF + kA (the softmax runs in the products' type on the CPU)
// and the noises, and x is kept as linear1's l-byte copy; the residual
// sums (the norms' inputs), the output and the statistics stay float32.
// Two things float32 does not keep: the layer's input's l-byte copy (QKV's
// input, U) and the weights' l-byte copies, each kept by its product until
// the backward (4h^2 + 2hf elements). So
//   kNone       4 (3U + 4 s b) + l (6U + kF + kA + d + 4h^2 + 2hf)
//   kSelective  kNone's less l k A, plus the generator's state
//   kFull       4U, plus the generator's state
//   kMatmuls    l (6U + F + A) + 4U, plus the generator's state
// (On CUDA autocast runs the softmax in float32: its A terms would take 4
// bytes there; not measured here. fp16 on the CPU is emulated in float32
// tensors: refused.)
// `generator_state`: the bytes of the CPU generator's state a recomputed
// region saves (memory::generator_state_bytes()).
int64_t activation_bytes(const tensor_parallel::LayerShape& shape, memory::Recompute policy, bool dropout,
                         int64_t generator_state, memory::Precision precision = memory::Precision::kFp32);

// The layer's pieces, with its products run by `products`.
// q, k, v (N H, S, d), q scaled -> (N H, S, d).
at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                          double dropout, bool training, memory::Products& products);
// The whole layer; the core recomputed when `recompute_core`.
at::Tensor encoder_layer_pieces(torch::nn::TransformerEncoderLayerImpl& layer, const at::Tensor& src,
                                const at::Tensor& mask, memory::Products& products, bool recompute_core,
                                const FeedForward& feed_forward = {});

}  // namespace distlab::models
