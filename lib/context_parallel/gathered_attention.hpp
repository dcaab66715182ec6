// Context parallelism without a ring, and the naive version beside it.
//
// all_gather_attention: each rank's K and V (and their positions) are
// gathered from every rank once, then its queries attend the whole
// sequence in one block. PyTorch's context_parallel does this by default
// (rotate_method "allgather"), and Llama 3 trained so: one collective
// instead of C - 1 ring steps, at the price of holding every rank's K and V.
//
// naive_attention: gather Q, K and V whole, attend, keep my rows. Every
// rank does the whole sequence's work: correct, and no parallelism at all.
// The reference the others are checked against.
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"
#include "context_parallel/block_attention.hpp"

namespace distlab::context_parallel {

// x (..., S_local, D) from every rank of `comm`, in rank order along dim
// -2: (..., C S_local, D). Every rank holds as many tokens. Collective tag
// `tag` (collectives/tags.hpp). Differentiable when x requires grad: the
// backward of an all-gather is a reduce-scatter (every rank's gradient for
// my tokens, summed), so all_gather_attention and naive_attention train.
at::Tensor gather_sequence(comm::Communicator& comm, const at::Tensor& x, int tag = 0);

// The positions (S_local,) of every rank's tokens, in rank order (S,), on
// the CPU.
at::Tensor gather_positions(comm::Communicator& comm, const at::Tensor& positions, int tag = 0);

// Arguments as ring_attention's (ring_attention.hpp).
BlockResult all_gather_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, double scale, const at::Tensor& positions, bool causal,
                                 int tag = 0);
BlockResult naive_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale, const at::Tensor& positions, bool causal, int tag = 0);

}  // namespace distlab::context_parallel
