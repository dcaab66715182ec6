// One training step: the pipeline's microbatches, each stage's gradients
// averaged among its replicas (DDP's all-reduce or ZeRO's reduce-scatter),
// the whole model's norm clipped, SGD; with a loss scaler the gradients are
// divided back before clipping and a step whose gradients are not finite
// is skipped.
#include <cmath>
#include <limits>

#include "train/batches.hpp"
#include "train/run.hpp"

namespace distlab::train {

namespace {

// With a loss scaler: the backward's seed times its scale (at
// TrainerOptions::inject_overflow_at_step replica 0's seed is infinite, as
// a scale too large for float16 would make its gradients, before they are
// averaged with the others').
void scale_the_loss(Run& run, int64_t step_number) {
  if (!run.scaler) return;
  const bool overflow = step_number == run.o.plan.memory.inject_overflow_at_step && run.rank.groups.place.replica == 0;
  const double scale = overflow ? std::numeric_limits<double>::infinity() : run.scaler->scale();
  run.executor->set_gradient_scale(run.gradient_scale * scale);
  run.rank.set_aux_loss_scale(run.aux_loss_scale * scale);  // experts' losses too
}

// With a loss scaler: the gradients this rank holds divided back by the scale.
void unscale_gradients(Run& run, TrainResult& result) {
  if (!run.scaler) return;
  result.loss_scales.push_back(run.scaler->scale());
  run.scaler->unscale(run.rank.held_gradients());
}

// Whether the optimizer steps: always without a scaler; with one, unless
// the whole model's norm (summed over every rank by the clipping, so every
// rank decides alike) is not finite: then the step is skipped, said, and
// the scale backs off.
bool step_is_taken(Run& run, int64_t step_number, double norm, TrainResult& result) {
  if (!run.scaler) return true;
  const double scale = run.scaler->scale();
  if (run.scaler->update(!std::isfinite(norm))) return true;
  result.skipped_steps.push_back(step_number);
  if (run.rank.last)
    run.print("step " + std::to_string(step_number) + " skipped: the gradients hold an inf or a NaN at loss scale " +
              memory::scale_text(scale) + "; the scale backs off to " + memory::scale_text(run.scaler->scale()));
  return false;
}

}  // namespace

pipeline::StepResult train_step(Run& run, const at::Tensor& input, const at::Tensor& target, int64_t step_number,
                                TrainResult& result) {
  auto& strategies = run.rank.data_parallel;
  for (auto& dp : strategies) dp->zero_grad();
  for (auto& dp : strategies) dp->begin_step();  // the microbatches accumulate without traffic ...
  const auto [my_input, my_target] = my_rows(run.rank.context, input, target);
  run.batch_rows = input.size(0);
  scale_the_loss(run, step_number);
  pipeline::StepResult step = run.executor->step(my_input, my_target);  // ... until each stage's last backward
  for (auto& dp : strategies) dp->end_step();
  unscale_gradients(run, result);
  const double norm = run.rank.clip_grad_norm(run.o.loop.clip);
  result.grad_norms.push_back(norm);
  if (step_is_taken(run, step_number, norm, result))
    for (auto& dp : strategies) dp->optimizer_step();
  if (step.has_loss) step.loss = replica_loss(run.rank.context, step.loss, run.world.device());
  return step;
}

}  // namespace distlab::train
