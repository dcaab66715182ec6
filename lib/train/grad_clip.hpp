// torch.nn.utils.clip_grad_norm_ over a model whose gradients lie on many
// ranks: cut into pipeline stages, sharded among replicas (ZeRO), cut
// across a tensor group, or all at once.
//
// Each held stage's data-parallel object (data_parallel.hpp) says what its
// gradients add to the norm as shares: gradients, and the groups over
// which their sum of squares is all-reduced first (a ZeRO shard's over the
// replica group, a cut matrix's over the tensor group, both for a ZeRO
// shard of a cut stage; a tensor every rank of its groups holds whole,
// none). The shares' sums are added, then summed
// over `whole_model` (the pipeline group: every stage's part), and
// square-rooted. Every rank then scales its shares' gradients by
// max_norm / (norm + 1e-6) when that is below 1, as torch does. Replicas
// hold equal (averaged) gradients, so every pipeline computes the same norm.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "comm/communicator.hpp"
#include "train/data_parallel.hpp"

namespace distlab::train {

// Returns the whole model's gradient norm before clipping, the same on
// every rank. Shares with the same groups are added as one list, in the
// order given (so that the sum is the same whatever the number of stages a
// rank holds). `whole_model` null: the shares are the whole model (the
// one-process reference). A parameter without a gradient has no share.
double clip_grad_norm(const std::vector<NormShare>& shares, double max_norm, comm::Communicator* whole_model = nullptr);

}  // namespace distlab::train
