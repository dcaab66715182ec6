#include "train/sharded_stage.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "train/grad_clip.hpp"

namespace distlab::train {

void check_zero_stage(int zero) {
  if (zero >= 0 && zero <= 3) return;
  throw std::invalid_argument("--zero " + std::to_string(zero) +
                              ": expected 0 (DDP), 1 (ZeRO-1: optimizer state sharded), 2 (ZeRO-2: gradients too) "
                              "or 3 (ZeRO-3: parameters too)");
}

ShardedStage::ShardedStage(comm::Communicator& pipeline, comm::Communicator& replicas, torch::nn::Sequential units,
                           pipeline::Schedule schedule, pipeline::ExecutorOptions executor_options, int zero,
                           const zero::OptimizerFactory& make_optimizer)
    : pipeline_(pipeline), zero_(zero) {
  check_zero_stage(zero);
  if (zero == 0) throw std::invalid_argument("ShardedStage: --zero 0 is DDP; use ReplicatedStage");
  if (zero == 1) zero1_ = std::make_unique<zero::Zero1>(replicas, *units, make_optimizer);
  if (zero == 2) zero2_ = std::make_unique<zero::Zero2>(replicas, *units, make_optimizer);
  if (zero == 3) zero3_ = std::make_unique<zero::Zero3>(replicas, units, make_optimizer);
  // ZeRO made the parameters views into its flat buffers (set_data): the
  // same tensors, so the executor's list of them still holds.
  pipeline::StageModule stage = pipeline::stage_of(units);
  if (zero3_) stage.forward = [z = zero3_.get()](const at::Tensor& x) { return z->forward(x); };
  executor_options.before_backward = [this](int, int, bool is_last) { before_backward(is_last); };
  executor_ = std::make_unique<pipeline::PipelineExecutor>(pipeline, std::move(schedule),
                                                           std::vector<pipeline::StageModule>{std::move(stage)},
                                                           std::move(executor_options));
}

zero::ShardedOptimizer& ShardedStage::sharded() {
  if (zero1_) return zero1_->sharded();
  return zero2_ ? zero2_->sharded() : zero3_->sharded();
}

void ShardedStage::zero_grad() {
  if (zero1_) zero1_->zero_grad();
  if (zero2_) zero2_->zero_grad();
  if (zero3_) zero3_->zero_grad();
}

void ShardedStage::before_backward(bool is_last) {
  if (is_last) no_sync_.reset();  // this backward's hooks reduce-scatter the summed .grad
}

pipeline::StepResult ShardedStage::step(const at::Tensor& input, const at::Tensor& target) {
  if (zero2_) no_sync_.emplace(zero2_->no_sync());  // lifted before the stage's last backward
  if (zero3_) no_sync_.emplace(zero3_->no_sync());
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
  if (zero3_) zero3_->step();
}

std::optional<zero::Zero3::WholeParameters> ShardedStage::whole_parameters() {
  if (!zero3_) return std::nullopt;
  return zero3_->whole_parameters();
}

int64_t ShardedStage::synced_steps() {
  if (zero2_) return zero2_->stats().synced_steps;
  return zero3_ ? zero3_->stats().synced_steps : reductions_;
}

}  // namespace distlab::train
