// torch.nn.utils.clip_grad_norm_ over a model cut into pipeline stages.
//
// The norm is the whole model's: each stage's sum of squared gradient
// entries, summed across the pipeline group (one all-reduce of one float),
// then square-rooted. Every stage then scales its own gradients by
// max_norm / (norm + 1e-6) when that is below 1, as torch does. Replicas
// hold equal (averaged) gradients, so every pipeline computes the same norm.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "comm/communicator.hpp"

namespace distlab::train {

// Returns the whole model's gradient norm before clipping (same on every
// rank of `pipeline`). Parameters without a gradient count as zero.
double clip_grad_norm(comm::Communicator& pipeline, const std::vector<at::Tensor>& parameters, double max_norm);

// The same where each stage's replicas shard its averaged gradient (ZeRO,
// sharded_stage.hpp): `shard` holds this rank's chunks, whose .grad the
// reduce-scatters filled. The squares are summed over the shards (one
// all-reduce in `replicas`), then over the stages (one in `pipeline`), and
// each rank scales its shard's gradient. Same value on every rank.
double clip_grad_norm_sharded(comm::Communicator& pipeline, comm::Communicator& replicas,
                              const std::vector<at::Tensor>& shard, double max_norm);

// The same where each stage's layers are cut across a tensor group
// (tensor_stage.hpp): `split` holds this rank's parts of the cut matrices,
// whose squares are summed over `tensor`; `replicated` (the same on every
// tensor rank: embedding, decoder, norms, biases) count once. Then the
// stages' sums are added over `pipeline`, and every rank scales both.
double clip_grad_norm_tensor_parallel(comm::Communicator& pipeline, comm::Communicator& tensor,
                                      const std::vector<at::Tensor>& replicated, const std::vector<at::Tensor>& split,
                                      double max_norm);

// The one-process reference: the same on parameters that hold the whole model.
double clip_grad_norm_local(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace distlab::train
