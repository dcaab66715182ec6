#include "models/positional_encoding.hpp"

#include <ATen/ATen.h>

#include <cmath>

namespace distlab::models {

PositionalEncodingImpl::PositionalEncodingImpl(int64_t d_model, double dropout, int64_t max_len) {
  TORCH_CHECK(d_model > 0 && d_model % 2 == 0, "PositionalEncoding: d_model must be even and positive, got ", d_model,
              " (hint: sin and cos take alternate features)");
  TORCH_CHECK(max_len > 0, "PositionalEncoding: max_len must be positive, got ", max_len);
  // The tutorial's float32 arithmetic, step for step, so the table matches it.
  const at::Tensor position = at::arange(0, max_len, at::kFloat).unsqueeze(1);                      // (max_len, 1)
  const at::Tensor div_term = at::exp(at::arange(0, d_model, 2, at::kFloat) *
                                      (-std::log(10000.0) / static_cast<double>(d_model)));       // (d/2)
  at::Tensor pe = at::zeros({max_len, d_model}, at::kFloat);
  pe.slice(/*dim=*/1, /*start=*/0, /*end=*/d_model, /*step=*/2).copy_(at::sin(position * div_term));
  pe.slice(/*dim=*/1, /*start=*/1, /*end=*/d_model, /*step=*/2).copy_(at::cos(position * div_term));
  pe_ = register_buffer("pe", pe.unsqueeze(1));  // (max_len, 1, d_model)
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

at::Tensor PositionalEncodingImpl::forward(const at::Tensor& x, const at::Tensor& positions) {
  return dropout_(add(x, positions));
}

at::Tensor PositionalEncodingImpl::add(const at::Tensor& x, const at::Tensor& positions) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == pe_.size(2), "PositionalEncoding: expected (S, N, ", pe_.size(2),
              "), got ", x.sizes());
  if (positions.defined()) {
    TORCH_CHECK(positions.dim() == 1 && positions.size(0) == x.size(0), "PositionalEncoding: ", x.size(0),
                " tokens but ", positions.numel(), " positions");
    TORCH_CHECK(positions.numel() == 0 || positions.max().item<int64_t>() < pe_.size(0),
                "PositionalEncoding: position ", positions.max().item<int64_t>(), " is past max_len ", pe_.size(0),
                " (hint: raise max_len or shorten the sequence)");
    return x + pe_.index_select(0, positions.to(pe_.device(), at::kLong));
  }
  TORCH_CHECK(x.size(0) <= pe_.size(0), "PositionalEncoding: expected (S, N, ", pe_.size(2), ") with S <= max_len ",
              pe_.size(0), ", got ", x.sizes(), " (hint: raise max_len or shorten the sequence)");
  return x + pe_.slice(/*dim=*/0, /*start=*/0, /*end=*/x.size(0));
}

}  // namespace distlab::models
