// Megatron-LM's two linears (Shoeybi et al. 2019, section 3), cut from an
// unsplit torch::nn::Linear(in, out) (y = x W^T + b, W of shape (out, in))
// across the tensor group `group` of t ranks, rank r keeping:
//
//   ColumnParallelLinear   rows [r out/t, (r+1) out/t) of W and of b: its
//                          slice of the output features. Forward
//                          f (regions.hpp) then x W_r^T + b_r.
//   RowParallelLinear      columns [r in/t, (r+1) in/t) of W: it takes the
//                          slice of the input features the column-parallel
//                          linear before it produced, and its x_r W_r^T is a
//                          partial sum of y; g sums them, then + b (whole on
//                          every rank).
//
// An MLP Column -> GELU -> Row crosses the wire once forward (g) and once
// backward (f): the elementwise GELU needs no communication because each
// rank holds whole features. Attention splits the same way by heads.
//
// With sequence parallelism (options.sequence_parallel) the input of a
// column-parallel linear and the output of a row-parallel one are split
// along dim 0 (the sequence): f becomes gather_from_sequence_region and g
// reduce_scatter_to_sequence_region. The row-parallel bias then sees only this rank's rows:
// its gradient is a partial sum, to be all-reduced over the group with the
// other replicated parameters of the sequence-parallel region
// (layer.hpp's sync_sequence_parallel_grads).
//
// Each refuses, naming the sizes and the group sizes that would work, a
// feature count that t does not divide.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "tensor_parallel/regions.hpp"

namespace distlab::tensor_parallel {

struct ParallelOptions {
  bool sequence_parallel = false;
};

class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  // `full_weight` (out, in), `full_bias` (out) or undefined: the unsplit
  // layer's, the same on every rank; this rank keeps a copy of its rows.
  ColumnParallelLinearImpl(Communicator& group, const at::Tensor& full_weight, const at::Tensor& full_bias,
                           ParallelOptions options = {});
  // x (..., in) whole (sequence parallel: (S/t, ..., in), my rows) ->
  // (..., out/t) (sequence parallel: (S, ..., out/t)).
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight;  // (out/t, in)
  at::Tensor bias;    // (out/t) or undefined

 private:
  Communicator& group_;
  ParallelOptions options_;
};
TORCH_MODULE(ColumnParallelLinear);

class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(Communicator& group, const at::Tensor& full_weight, const at::Tensor& full_bias,
                        ParallelOptions options = {});
  // x (..., in/t), my slice of the features -> (..., out) whole (sequence
  // parallel: (S/t, ..., out), my rows).
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight;  // (out, in/t)
  at::Tensor bias;    // (out), the same on every rank, or undefined

 private:
  Communicator& group_;
  ParallelOptions options_;
};
TORCH_MODULE(RowParallelLinear);

// This rank's rows (dim 0) or columns (dim 1) of an unsplit tensor, copied;
// `what` names it in the refusal ("ColumnParallelLinear: 10 output features").
at::Tensor my_part(const Communicator& group, const at::Tensor& whole, int64_t dim, const std::string& what);

}  // namespace distlab::tensor_parallel
