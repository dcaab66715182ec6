// The batches a rank trains and evaluates on, and the loss it takes of them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "train/context_split.hpp"

namespace distlab::train {

// (S, N) input and (S, N) targets of rows i .. i+S of `source`: the
// tutorial's get_batch, turned back to S-first and with the targets aligned
// to the output position by position (target[s][n] follows input[s][n]).
std::pair<at::Tensor, at::Tensor> lm_batch(const at::Tensor& source, int64_t i, int64_t bptt, const at::Device& device);

// This rank's rows of a batch (S, N) under context parallelism: the
// sequence padded at its end to a multiple of the layout's chunks (token
// 0, targets kPaddedTarget: a causal model's real tokens never see them),
// then this rank's chunks. The batch itself with C = 1.
std::pair<at::Tensor, at::Tensor> my_rows(const ContextSplit& context, const at::Tensor& input, const at::Tensor& target);

// The loss of a microbatch's logits `out` (S, n, V) against `target`
// (S, n), in float32 (16-bit logits under mixed precision): the mean over
// its tokens; under context parallelism this rank's tokens' sum over the
// C-th part of the microbatch's tokens (`batch_rows`: the sequence's rows
// before padding, which counts for nothing), so that the context ranks'
// losses, and their gradients, average to the mean over all of them, as
// DDP's average over data x context wants.
at::Tensor lm_loss(const ContextSplit& context, const at::Tensor& out, const at::Tensor& target, int64_t batch_rows);

// The replica's mean loss of a step from this rank's `loss`: under context
// parallelism each rank's loss is its tokens' share, and the context ranks'
// losses average to the replica's mean (every context rank calls it).
double replica_loss(const ContextSplit& context, double loss, const at::Device& device);

}  // namespace distlab::train
