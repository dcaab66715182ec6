#include "train/sharded_stage.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "train/grad_clip.hpp"

namespace distlab::train {

void check_zero_stage(int zero) {
  if (zero == 0 || zero == 1 || zero == 2) return;
  if (zero == 3)
    throw std::invalid_argument(
        "--zero 3 is not available in the capstone: ZeRO-3 (lib/zero/zero3.hpp) runs a torch::nn::Sequential of "
        "one-tensor units and gathers parameters only inside its own forward, but a Transformer stage's layers also "
        "take the causal mask, and the trainer reads whole parameters outside the step (evaluation, the best model, "
        "the digest, checkpoints). It would take a stage built as a Sequential of units (embedding, one layer with its "
        "mask, decoder) whose forward is Zero3::forward, and Zero3::full_parameters() wherever the trainer reads "
        "parameters. Use --zero 1 or --zero 2 (lesson 12 runs ZeRO-3 on its own)");
  throw std::invalid_argument("--zero " + std::to_string(zero) +
                              ": expected 0 (DDP), 1 (ZeRO-1: optimizer state sharded) or 2 (ZeRO-2: gradients too)");
}

ShardedStage::ShardedStage(comm::Communicator& pipeline, comm::Communicator& replicas, torch::nn::Module& module,
                           pipeline::StageModule stage, pipeline::Schedule schedule,
                           pipeline::ExecutorOptions executor_options, int zero,
                           const zero::OptimizerFactory& make_optimizer)
    : pipeline_(pipeline), zero_(zero) {
  check_zero_stage(zero);
  if (zero == 0) throw std::invalid_argument("ShardedStage: --zero 0 is DDP; use ReplicatedStage");
  if (zero == 1) zero1_ = std::make_unique<zero::Zero1>(replicas, module, make_optimizer);
  if (zero == 2) zero2_ = std::make_unique<zero::Zero2>(replicas, module, make_optimizer);
  // ZeRO made the parameters views into its flat buffers (set_data): the
  // same tensors, so the executor's list of them still holds.
  executor_options.before_backward = [this](int, int, bool is_last) { before_backward(is_last); };
  executor_ = std::make_unique<pipeline::PipelineExecutor>(pipeline, std::move(schedule),
                                                           std::vector<pipeline::StageModule>{std::move(stage)},
                                                           std::move(executor_options));
}

void ShardedStage::zero_grad() {
  if (zero1_) zero1_->zero_grad();
  if (zero2_) zero2_->zero_grad();
}

void ShardedStage::before_backward(bool is_last) {
  if (is_last) no_sync_.reset();  // ZeRO-2: this backward's hooks reduce-scatter the summed .grad
}

pipeline::StepResult ShardedStage::step(const at::Tensor& input, const at::Tensor& target) {
  if (zero2_) no_sync_.emplace(zero2_->no_sync());  // lifted before the stage's last backward
  pipeline::StepResult result = executor_->step(input, target);
  no_sync_.reset();
  if (zero1_) {  // the m backwards summed in .grad; now one reduce-scatter of the sum
    zero1_->reduce_gradients();
    ++reductions_;
  }
  return result;
}

double ShardedStage::clip_grad_norm(double max_norm) {
  return clip_grad_norm_sharded(pipeline_, sharded().comm(), sharded().shard(), max_norm);
}

void ShardedStage::optimizer_step() {
  if (zero1_) zero1_->step();
  if (zero2_) zero2_->step();
}

int64_t ShardedStage::synced_steps() { return zero2_ ? zero2_->stats().synced_steps : reductions_; }

}  // namespace distlab::train
