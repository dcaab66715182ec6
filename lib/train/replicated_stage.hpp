// A pipeline stage replicated by DDP: the composition of lib/pipeline and
// lib/ddp that the capstone trains with.
//
// One step on the rank of stage s, replica r (a rank holding several
// stages does the same for each, with a DDP per stage):
//   - the executor runs the schedule's m forwards and backwards of stage s
//     with the other stages of pipeline r; gradients pile up in .grad;
//   - all but the last backward run under ddp.no_sync(): no traffic;
//   - just before the stage's last backward (the executor's before_backward
//     hook) synchronization is turned on and ddp.prepare_forward() arms the
//     reducer, so that last backward's gradient hooks all-reduce the summed
//     .grad in buckets among the replicas of stage s while backward runs;
//   - the reduction is awaited at the end of that backward (the autograd
//     engine's callback), or by finalize() after the step when the last
//     backward took another path (a split W pass).
// So each stage's gradients cross the replica group once per step, not once
// per microbatch. PyTorch's pipelining reaches into DDP's reducer for the
// same effect ("HACK" in torch/distributed/pipelining/stage.py); here it is
// the executor's before_backward option and DDP's public prepare_forward().
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <vector>

#include "ddp/distributed_data_parallel.hpp"
#include "pipeline/executor.hpp"

namespace distlab::train {

class ReplicatedStage {
 public:
  // One stage this rank holds: its number in the schedule, its module (DDP
  // wraps it) and the executor's view of it.
  struct Held {
    int stage = 0;
    std::shared_ptr<torch::nn::Module> module;
    pipeline::StageModule forward;
  };

  // `pipeline`: this replica's ranks (group rank = pipeline rank);
  // `replicas`: the same pipeline rank in every replica (group rank =
  // replica). `held`: this rank's stages in the order of their numbers
  // (one, or several for interleaved and V schedules), each replicated by
  // its own DDP, armed before that stage's own last backward, on its own
  // group split from `replicas` (the DDPs' buckets never share a channel).
  // Their parameters are made equal to replica 0's (DDP's broadcast).
  ReplicatedStage(comm::Communicator& pipeline, comm::Communicator& replicas, std::vector<Held> held,
                  pipeline::Schedule schedule, pipeline::ExecutorOptions executor_options,
                  ddp::DdpOptions ddp_options = {});

  // One step: input (first stage) and target (last stage) as the executor
  // takes them. Returns with the replicas' average of this rank's stages'
  // gradients in .grad (zero them before, as with any optimizer).
  pipeline::StepResult step(const at::Tensor& input, const at::Tensor& target);

  ddp::DistributedDataParallel& ddp(size_t k = 0) { return *ddps_.at(k); }  // of the k-th stage held
  size_t stages_held() const { return ddps_.size(); }
  pipeline::PipelineExecutor& executor() { return *executor_; }

 private:
  void before_backward(int stage, bool is_last);

  std::vector<std::unique_ptr<comm::Communicator>> groups_;  // one per stage held (split from `replicas`)
  std::vector<std::unique_ptr<ddp::DistributedDataParallel>> ddps_;
  std::vector<int> stages_;                                  // their numbers
  std::unique_ptr<pipeline::PipelineExecutor> executor_;
  std::vector<std::optional<ddp::DistributedDataParallel::NoSync>> no_sync_;
};

}  // namespace distlab::train
