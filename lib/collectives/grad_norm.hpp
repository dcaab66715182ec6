// torch.nn.utils.clip_grad_norm_ over a model whose gradients lie on many
// ranks: cut into pipeline stages, sharded among replicas (ZeRO), cut
// across a tensor group, spread over an expert group, or all at once. The
// one gradient clip of the library: the trainer's, and each ZeRO object's
// own (zero/sharded_optimizer.hpp), are this.
//
// The gradients come as shares: gradients, and the groups over which their
// sum of squares is all-reduced first (their pieces lie on the groups'
// ranks): a ZeRO shard's over the replica group, a cut matrix's over the
// tensor group, both for a ZeRO shard of a cut stage; a tensor every rank
// of its groups holds whole, none. The shares' sums are added, then summed
// over `whole_model` (the pipeline group: every stage's part), and
// square-rooted. Every rank then scales its shares' gradients by
// max_norm / (norm + 1e-6) when that is below 1, as torch does. Replicas
// hold equal (averaged) gradients, so every pipeline computes the same norm.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::collectives {

// Gradients whose squares the norm adds (clipping scales them in place),
// and the groups over which their sum is all-reduced first.
struct NormShare {
  std::vector<at::Tensor> gradients;
  std::vector<comm::Communicator*> summed_over;
};

// Returns the whole model's gradient norm before clipping, the same on
// every rank. Shares with the same groups are added as one list, in the
// order given (so that the sum is the same whatever the number of stages a
// rank holds). `whole_model` null: the shares are the whole model (or
// `summed_over` makes them so; the one-process reference has neither).
// A parameter without a gradient has no share. The sums are float64 on the
// groups' device (the first gradient's when there is no group).
double clip_grad_norm(const std::vector<NormShare>& shares, double max_norm, comm::Communicator* whole_model = nullptr);

// The elements of a gradient the norm converts to float64 at a time: its
// scratch is at most this many doubles (planner/memory_model.hpp counts it).
constexpr int64_t kNormChunk = int64_t{1} << 16;

}  // namespace distlab::collectives
