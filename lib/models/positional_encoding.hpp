// The DDP + Pipe tutorial's PositionalEncoding: adds a fixed sinusoidal table to the scaled
// embeddings, then dropout.
//   pe[p, 0, 2i]   = sin(p * exp(2i * -ln(10000) / d))
//   pe[p, 0, 2i+1] = cos(p * exp(2i * -ln(10000) / d))
// x (S, N, d) -> x + pe[:S] (broadcast over N) -> dropout.
//
// The table is a buffer named "pe": saved in checkpoints like a parameter,
// but not a parameter. The tutorial's code holds it as
// nn.Parameter(requires_grad=False), which its get_total_params would count;
// the count the tutorial printed (1,041,453,167) does not include the
// 5000 x 4096 table, so DistLab counts as the printed result does.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace distlab::models {

class PositionalEncodingImpl : public torch::nn::Module {
 public:
  // d_model must be even (the tutorial's pe[:, 1::2] assignment needs it too).
  PositionalEncodingImpl(int64_t d_model, double dropout, int64_t max_len = 5000);

  // x (S, N, d_model) with S <= max_len -> (S, N, d_model). With
  // `positions` (S,) int64: row s gets pe[positions[s]] instead of pe[s]
  // (a rank holding some of a sequence's tokens under context
  // parallelism, each at its own place in the whole sequence).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions = {});
  // The same without the dropout (a caller that draws its masks some other way).
  at::Tensor add(const at::Tensor& x, const at::Tensor& positions = {});

  const at::Tensor& table() const { return pe_; }  // (max_len, 1, d_model)

 private:
  at::Tensor pe_;
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(PositionalEncoding);

}  // namespace distlab::models
