#include "train/pipeline_forward.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <stdexcept>

#include "comm/shaped_p2p.hpp"

namespace distlab::train {

LossSum forward_loss_sum(comm::Communicator& pipeline, const StageForward& forward, const at::Tensor& input,
                         const at::Tensor& target, int tag) {
  std::vector<int> rank_of_stage(static_cast<size_t>(pipeline.size()));
  for (int s = 0; s < pipeline.size(); ++s) rank_of_stage[static_cast<size_t>(s)] = s;
  return forward_loss_sum(pipeline, rank_of_stage, {{pipeline.rank(), forward}}, input, target, tag);
}

LossSum forward_loss_sum(comm::Communicator& pipeline, const std::vector<int>& rank_of_stage,
                         const std::map<int, StageForward>& forwards, const at::Tensor& input, const at::Tensor& target,
                         int tag) {
  at::NoGradGuard no_grad;
  const int me = pipeline.rank(), stages = static_cast<int>(rank_of_stage.size());
  const auto owner = [&](int s) { return rank_of_stage.at(static_cast<size_t>(s)); };
  at::Tensor out;  // the output of the last stage this rank ran
  for (int s = 0; s < stages; ++s) {
    if (owner(s) != me) continue;
    at::Tensor x = input;                                        // stage 0: the tokens
    if (s > 0 && owner(s - 1) != me) x = comm::recv_with_shape(pipeline, owner(s - 1), tag + 2 * s);
    else if (s > 0) x = out;                                     // from this rank's previous stage, in memory
    out = forwards.at(s)(x);
    if (s + 1 < stages && owner(s + 1) != me) comm::send_with_shape(pipeline, out, owner(s + 1), tag + 2 * (s + 1));
  }
  if (owner(stages - 1) != me) return {};
  // out (S, N, V), target (S, N): aligned position by position.
  const at::Tensor logits = out.reshape({-1, out.size(-1)}).to(at::kFloat);  // 16-bit under mixed precision
  const at::Tensor flat = target.reshape({-1}).to(logits.device());
  const double sum = at::cross_entropy_loss(logits, flat, /*weight=*/{}, at::Reduction::Sum).item<double>();
  return {sum, flat.ne(kPaddedTarget).sum().item<int64_t>()};
}

}  // namespace distlab::train
