// A stack of the capstone's Transformer layers (torch's
// TransformerEncoderLayer: post-norm, relu, dropout; causal), run under a
// recomputation policy and a precision, and what lesson 17 and
// `distlab-bench memory` measure on it: the bytes its forward keeps for
// the backward (the allocator meter) and the time of a step.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/transformerlayer.h>

#include <cstdint>
#include <vector>

#include "memory/precision.hpp"
#include "memory/recompute.hpp"

namespace distlab::models {

struct LayerStackOptions {
  int64_t layers = 4;
  int64_t hidden = 128;  // the capstone's cpu preset: d 128, 4 heads, ffn 256
  int64_t heads = 4;
  int64_t ffn = 256;
  double dropout = 0.2;
  uint64_t seed = 17;  // the weights
};

class LayerStack {
 public:
  // Throws std::invalid_argument when the heads do not divide the width.
  explicit LayerStack(const LayerStackOptions& options);

  // x (S, N, d) -> (S, N, d), every layer under `policy`
  // (models/encoder_layer.hpp), with the causal mask.
  at::Tensor forward(const at::Tensor& x, memory::Recompute policy);
  // The bytes still allocated after the forward, its output held (the
  // process's allocator meter, installed on first use; CPU tensors).
  int64_t kept_bytes(const at::Tensor& x, memory::Recompute policy, memory::Precision precision);
  // What kept_bytes should measure: the layers' activation_bytes
  // (models/encoder_layer.hpp) summed, less two things a stack does not
  // keep with bf16 products under none and selective: each inner layer's
  // float32 output (4U: the next layer reads it through its bf16 copy and
  // adds it to its residual, neither of which keeps it), and, when x
  // needs no gradient, the first layer's bf16 copy of in_proj's weight
  // (3h^2 x 2: its product owes x no gradient). In float32 the next
  // layer's QKV product keeps the output itself, and a recomputed region
  // keeps its input: L times a layer's bytes.
  int64_t kept_formula(const at::Tensor& x, memory::Recompute policy, memory::Precision precision) const;
  // One forward (in `precision`) and backward of mean(out^2); seconds.
  double step_seconds(const at::Tensor& x, memory::Recompute policy, memory::Precision precision);

  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  int64_t parameter_count() const { return count_; }
  void zero_grad();
  // Each parameter's gradient, copied.
  std::vector<at::Tensor> gradients() const;
  const LayerStackOptions& options() const { return options_; }
  // The causal mask for sequences of length s, made now (once per length):
  // call it before measuring anything else than kept_bytes, which does.
  const at::Tensor& mask_for(int64_t s);

 private:
  LayerStackOptions options_;
  std::vector<torch::nn::TransformerEncoderLayer> layers_;
  std::vector<at::Tensor> parameters_;
  int64_t count_ = 0;
  at::Tensor mask_;
};

// (S, N, d) normal numbers from a generator of their own (seed 99).
at::Tensor layer_stack_input(int64_t seq, int64_t batch, int64_t hidden);

}  // namespace distlab::models
