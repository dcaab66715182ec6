// Forward only, through the stages of one pipeline, for evaluation: no
// microbatches, no autograd, one activation message per stage boundary.
//
//   stage 0: forward(tokens (S, N)) -> send (S, N, d) to stage 1
//   stage k: receive, forward, send to k + 1
//   last:    receive, forward -> logits (S, N, V) -> summed cross-entropy
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::train {

// Messages of evaluation use tags from here on, above the executor's.
inline constexpr int kEvalTagBase = 1 << 19;

// A target that counts for nothing (cross_entropy's ignore_index): the end
// of a sequence padded so that it splits over context ranks.
inline constexpr int64_t kPaddedTarget = -100;

struct LossSum {
  double sum = 0;      // summed cross-entropy, nats
  int64_t tokens = 0;  // tokens it sums over
  double mean() const { return tokens > 0 ? sum / static_cast<double>(tokens) : 0.0; }
};

// Every rank of `pipeline` calls it with its stage's forward; `input` is
// read on stage 0 and `target` (S, N) on the last. Returns the summed loss
// and the tokens it sums (targets other than kPaddedTarget) on the last
// stage and {0, 0} elsewhere.
using StageForward = std::function<at::Tensor(const at::Tensor&)>;
LossSum forward_loss_sum(comm::Communicator& pipeline, const StageForward& forward, const at::Tensor& input,
                         const at::Tensor& target, int tag = kEvalTagBase);

// The same through S stages placed on the pipeline's ranks by
// `rank_of_stage` (several may live on one rank, as interleaved and V
// schedules place them: consecutive stages on one rank hand over in
// memory). `forwards` holds this rank's stages by number. Returns the
// summed loss on the rank of stage S - 1 and {0, 0} elsewhere.
LossSum forward_loss_sum(comm::Communicator& pipeline, const std::vector<int>& rank_of_stage,
                         const std::map<int, StageForward>& forwards, const at::Tensor& input, const at::Tensor& target,
                         int tag = kEvalTagBase);

}  // namespace distlab::train
