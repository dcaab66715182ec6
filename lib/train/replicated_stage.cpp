#include "train/replicated_stage.hpp"

#include <utility>

namespace distlab::train {

ReplicatedStage::ReplicatedStage(comm::Communicator& pipeline, comm::Communicator& replicas,
                                 std::shared_ptr<torch::nn::Module> module, pipeline::StageModule stage,
                                 pipeline::Schedule schedule, pipeline::ExecutorOptions executor_options,
                                 ddp::DdpOptions ddp_options)
    : ddp_(replicas, std::move(module), ddp_options) {
  executor_options.before_backward = [this](int, int, bool is_last) { before_backward(is_last); };
  executor_ = std::make_unique<pipeline::PipelineExecutor>(pipeline, std::move(schedule),
                                                           std::vector<pipeline::StageModule>{std::move(stage)},
                                                           std::move(executor_options));
}

void ReplicatedStage::before_backward(bool is_last) {
  if (!is_last) return;
  no_sync_.reset();        // synchronization back on ...
  ddp_.prepare_forward();  // ... and the reducer armed for this backward
}

pipeline::StepResult ReplicatedStage::step(const at::Tensor& input, const at::Tensor& target) {
  // The flag is read when the reducer is prepared: once here for all the
  // microbatches but the last (no_sync), once more in before_backward.
  no_sync_.emplace(ddp_.no_sync());
  ddp_.prepare_forward();
  pipeline::StepResult result = executor_->step(input, target);
  no_sync_.reset();
  // Idempotent: a no-op when the engine's callback already waited.
  ddp_.reducer().finalize();
  return result;
}

}  // namespace distlab::train
