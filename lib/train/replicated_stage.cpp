#include "train/replicated_stage.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace distlab::train {

ReplicatedStage::ReplicatedStage(comm::Communicator& pipeline, comm::Communicator& replicas, std::vector<Held> held,
                                 pipeline::Schedule schedule, pipeline::ExecutorOptions executor_options,
                                 ddp::DdpOptions ddp_options) {
  if (held.empty()) throw std::invalid_argument(pipeline.self() + ": a pipeline rank holding no stage");
  std::vector<pipeline::StageModule> forwards;
  for (size_t k = 0; k < held.size(); ++k) {
    comm::Communicator* group = &replicas;
    if (held.size() > 1) {  // every replica splits in the same order: stage by stage
      groups_.push_back(replicas.split(0, replicas.rank(), replicas.group() + "-stage" + std::to_string(held[k].stage)));
      group = groups_.back().get();
    }
    ddps_.push_back(std::make_unique<ddp::DistributedDataParallel>(*group, held[k].module, ddp_options));
    stages_.push_back(held[k].stage);
    forwards.push_back(std::move(held[k].forward));
  }
  no_sync_.resize(ddps_.size());
  executor_options.before_backward = [this](int stage, int, bool is_last) { before_backward(stage, is_last); };
  executor_ = std::make_unique<pipeline::PipelineExecutor>(pipeline, std::move(schedule), std::move(forwards),
                                                           std::move(executor_options));
}

void ReplicatedStage::before_backward(int stage, bool is_last) {
  if (!is_last) return;
  const size_t k = static_cast<size_t>(std::find(stages_.begin(), stages_.end(), stage) - stages_.begin());
  no_sync_.at(k).reset();     // synchronization back on ...
  ddps_[k]->prepare_forward();  // ... and that stage's reducer armed for this backward
}

pipeline::StepResult ReplicatedStage::step(const at::Tensor& input, const at::Tensor& target) {
  // The flag is read when a reducer is prepared: once here for all the
  // microbatches but the last (no_sync), once more in before_backward.
  for (size_t k = 0; k < ddps_.size(); ++k) {
    no_sync_[k].emplace(ddps_[k]->no_sync());
    ddps_[k]->prepare_forward();
  }
  pipeline::StepResult result = executor_->step(input, target);
  for (size_t k = 0; k < ddps_.size(); ++k) {
    no_sync_[k].reset();
    ddps_[k]->reducer().finalize();  // idempotent: a no-op when the engine's callback already waited
  }
  return result;
}

}  // namespace distlab::train
