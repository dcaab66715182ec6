// The four operations that move tensors in and out of a tensor-parallel
// region (Megatron-LM, Shoeybi et al. 2019, section 3; sequence parallelism:
// Korthikanti et al. 2022), each an autograd function whose backward is the
// forward's conjugate. `comm` is the tensor group: the ranks that split one
// layer's matrices.
//
//   copy_to_region       "f": forward the identity, backward all-reduce.
//                        Every rank feeds the same input to its slice of a
//                        column-parallel linear; each slice's input gradient
//                        is only its share, so backward sums them.
//   reduce_from_region   "g": forward all-reduce, backward the identity.
//                        A row-parallel linear's slices each hold a partial
//                        sum of the output; forward sums them, and the sum's
//                        gradient is the same for every addend.
//
// With sequence parallelism the tensors outside the region are split along
// the sequence (dim 0: (S, ...), S a multiple of the group size, rank r
// holding rows [r S/t, (r+1) S/t)), and the pair becomes:
//
//   gather_from_sequence_region
//       forward all-gather along dim 0, backward reduce-scatter: f with the
//       input split;
//   reduce_scatter_to_sequence_region
//       forward reduce-scatter along dim 0, backward all-gather: g with the
//       output split.
//
// The bytes are the same: a ring all-reduce is a reduce-scatter then an
// all-gather (lesson 05). What sequence parallelism saves is memory: the
// LayerNorm and dropout between the regions work on S/t rows.
//
//   scatter_to_sequence_region
//       forward keep my rows, backward all-gather: from a tensor every rank
//       holds whole into the split form (after the embedding).
//
// The names are Megatron-LM's (megatron/core/tensor_parallel/mappings.py:
// copy_to_tensor_model_parallel_region, reduce_from_..., gather_from_
// sequence_parallel_region, reduce_scatter_to_..., scatter_to_...): "scatter"
// there, as here, keeps a slice without adding; the one that sums is
// "reduce_scatter".
//
// Every rank of `comm` calls each operation in the same order, forward and
// backward, as with any collective. The collectives are DistLab's own
// (lib/collectives), ring by default; the tensor group's traffic shows in
// traces and the flight recorder under the group's name.
#pragma once

#include <ATen/core/Tensor.h>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"

namespace distlab::tensor_parallel {

using comm::Communicator;

at::Tensor copy_to_region(Communicator& comm, const at::Tensor& x);
at::Tensor reduce_from_region(Communicator& comm, const at::Tensor& x);
at::Tensor gather_from_sequence_region(Communicator& comm, const at::Tensor& x);
at::Tensor reduce_scatter_to_sequence_region(Communicator& comm, const at::Tensor& x);
at::Tensor scatter_to_sequence_region(Communicator& comm, const at::Tensor& x);

// My rows of a tensor every rank holds whole (dim 0), no autograd: what a
// rank of the sequence-parallel region holds. Throws std::invalid_argument
// naming the sizes when dim 0 does not split evenly among comm.size().
at::Tensor my_sequence_rows(const Communicator& comm, const at::Tensor& whole);

}  // namespace distlab::tensor_parallel
