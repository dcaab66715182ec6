// The reference the capstone is held equal to: the tutorial's loop written
// plainly in one process on the whole model, with torch's own
// clip_grad_norm_ and SGD, no pipeline, no DDP; in mixed precision under
// the same guard and loss scaler as the trainer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/corpus.hpp"
#include "train/trainer.hpp"

namespace distlab::tests {

struct ReferenceResult {
  std::vector<double> step_losses;
  std::vector<double> grad_norms;        // before clipping, squares summed in float64
  std::vector<double> torch_grad_norms;  // the same by torch::nn::utils::clip_grad_norm_
  std::vector<double> loss_scales;       // with o.plan.memory.loss_scaling: each step's scale
  std::vector<int64_t> skipped_steps;    // with o.plan.memory.loss_scaling: the steps (from 1) an overflow skipped
  double valid_loss = 0;  // true mean over the first eval_batches validation batches, after training
  std::map<std::string, at::Tensor> parameters;
};

// One epoch of o.loop.batches_per_epoch steps on all o.loop.batch_size columns, the
// forward in o.plan.memory.precision (memory::ComputeIn, on the CPU), with o.plan.memory.loss_scaler
// when o.plan.memory.loss_scaling, as the trainer runs them.
ReferenceResult train_one_process(const data::Corpus& corpus, const train::TrainerOptions& o);

}  // namespace distlab::tests
