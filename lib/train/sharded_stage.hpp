// A pipeline stage whose replicas shard instead of all-reducing: the
// capstone's `--zero 1|2`, in place of ReplicatedStage (replicated_stage.hpp).
//
// The replica group of stage s (the communicator DDP would all-reduce over)
// is the ZeRO group: each of its R ranks owns 1/R of the stage's flat
// parameters, of their averaged gradient and of the optimizer state.
//
// One step on the rank of stage s, replica r:
//   ZeRO-1  every microbatch's backward accumulates in .grad, no traffic;
//           after the step's last backward, one reduce-scatter of the summed
//           .grad gives this rank its chunk of the replicas' average;
//   ZeRO-2  the microbatches' backwards run under no_sync() except the last
//           (the executor's before_backward hook lifts the guard, as
//           ReplicatedStage turns DDP's sync on), whose accumulator hooks
//           reduce-scatter the summed .grad bucket by bucket while backward
//           goes on, and drop it;
//   then    the whole model's gradient norm (grad_clip.hpp: the shards'
//           squares summed over the replica group, then over the stages),
//           the shard clipped, the shard stepped, the parameters all-gathered.
// The same bytes cross the replica group as with DDP's once-per-step
// all-reduce (a reduce-scatter and an all-gather are its two halves), for
// 1/R of the optimizer state and, with ZeRO-2, 1/R of the gradient kept
// between steps.
//
// ZeRO-3 is not offered: lib/zero's Zero3 runs a torch::nn::Sequential whose
// children take one tensor, and a Transformer stage's layers also take the
// causal mask; the trainer also reads whole parameters outside the step
// (evaluation, the best model, the digest, checkpoints).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>

#include "pipeline/executor.hpp"
#include "zero/optimizer_factory.hpp"
#include "zero/sharded_optimizer.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"

namespace distlab::train {

// Throws std::invalid_argument unless `zero` is 0 (DDP), 1 or 2, saying why
// 3 is not available.
void check_zero_stage(int zero);

class ShardedStage {
 public:
  // `pipeline`: this replica's stages (group rank = stage); `replicas`: this
  // stage's copies (group rank = replica), the ZeRO group. `module` is this
  // rank's stage: its parameters become views into ZeRO's flat buffers and
  // equal to replica 0's. `zero` is 1 or 2.
  ShardedStage(comm::Communicator& pipeline, comm::Communicator& replicas, torch::nn::Module& module,
               pipeline::StageModule stage, pipeline::Schedule schedule, pipeline::ExecutorOptions executor_options,
               int zero, const zero::OptimizerFactory& make_optimizer);

  // Zeroes the gradients: ZeRO-1's buffers (the parameters' .grad and the
  // shard's are views of them); ZeRO-2 drops the parameters' .grad and
  // zeroes the shard's.
  void zero_grad();
  // The microbatches' forwards and backwards and the stage's one
  // reduce-scatter; returns with this rank's chunk of the replicas' average
  // gradient in the shard's .grad (zero_grad() first, as with any optimizer).
  pipeline::StepResult step(const at::Tensor& input, const at::Tensor& target);
  // torch's clip_grad_norm_ over the whole model (every stage's shards);
  // returns the norm before clipping, the same on every rank.
  double clip_grad_norm(double max_norm);
  // Steps the shard and all-gathers the parameters.
  void optimizer_step();

  int zero() const { return zero_; }
  torch::optim::Optimizer& optimizer() { return sharded().optimizer(); }
  zero::ShardedOptimizer& sharded() { return zero1_ ? zero1_->sharded() : zero2_->sharded(); }
  // Reduce-scatter rounds of this stage's gradients so far: one per step
  // when the microbatches accumulate as they should.
  int64_t synced_steps();

 private:
  void before_backward(bool is_last);

  comm::Communicator& pipeline_;
  int zero_;
  std::unique_ptr<zero::Zero1> zero1_;
  std::unique_ptr<zero::Zero2> zero2_;
  std::unique_ptr<pipeline::PipelineExecutor> executor_;
  std::optional<zero::Zero2::NoSync> no_sync_;
  int64_t reductions_ = 0;  // ZeRO-1's reduce-scatter rounds
};

}  // namespace distlab::train
