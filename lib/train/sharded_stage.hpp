// A pipeline stage whose replicas shard instead of all-reducing: the
// capstone's `--zero 1|2|3`, in place of ReplicatedStage (replicated_stage.hpp).
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
//   ZeRO-3  the same, but the stage runs as a chain of units (embedding,
//           each layer, decoder: TransformerLm::units()), each all-gathered
//           just before its forward and its backward and freed after; the
//           last backward reduce-scatters unit by unit;
//   then    the whole model's gradient norm (grad_clip.hpp: the shards'
//           squares summed over the replica group, then over the stages),
//           the shard clipped, the shard stepped (ZeRO-1/2: the parameters
//           all-gathered; ZeRO-3: they stay sharded).
// ZeRO-1/2 send the bytes of DDP's once-per-step all-reduce (a reduce-scatter
// and an all-gather are its two halves), for 1/R of the optimizer state
// and, with ZeRO-2, 1/R of the gradient kept between steps. ZeRO-3 holds
// 1/R of the parameters too, and pays for it in gathers: every microbatch
// gathers every unit twice (freed between one microbatch's forward and the
// next), 2m Psi_stage per step against one Psi_stage. FSDP under a pipeline
// schedule offers to keep the units whole from forward to backward
// (reshard_after_forward=False) to save that traffic, at the memory ZeRO-2
// holds. Reading the parameters outside the step (evaluation, checkpoints,
// the best model, the digest) takes whole_parameters(), FSDP's
// summon_full_params.
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
#include "zero/zero3.hpp"

namespace distlab::train {

// Throws std::invalid_argument unless `zero` is 0 (DDP), 1, 2 or 3.
void check_zero_stage(int zero);

class ShardedStage {
 public:
  // `pipeline`: this replica's stages (group rank = stage); `replicas`: this
  // stage's copies (group rank = replica), the ZeRO group. `units` is this
  // rank's stage as a chain of one-tensor units (TransformerLm::units()):
  // their parameters become views into ZeRO's flat buffers, equal to
  // replica 0's (ZeRO-3: whole only while used). `zero` is 1, 2 or 3.
  ShardedStage(comm::Communicator& pipeline, comm::Communicator& replicas, torch::nn::Sequential units,
               pipeline::Schedule schedule, pipeline::ExecutorOptions executor_options, int zero,
               const zero::OptimizerFactory& make_optimizer);

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

  // ZeRO-3: the stage's parameters whole while the guard lives, to read or
  // load them (Zero3::whole_parameters; every replica takes it, between
  // steps). ZeRO-1/2 keep them whole anyway: nothing then.
  std::optional<zero::Zero3::WholeParameters> whole_parameters();

  int zero() const { return zero_; }
  torch::optim::Optimizer& optimizer() { return sharded().optimizer(); }
  zero::ShardedOptimizer& sharded();
  // Reduce-scatter rounds of this stage's gradients so far: one per step
  // when the microbatches accumulate as they should.
  int64_t synced_steps();

 private:
  void before_backward(bool is_last);

  comm::Communicator& pipeline_;
  int zero_;
  std::unique_ptr<zero::Zero1> zero1_;
  std::unique_ptr<zero::Zero2> zero2_;
  std::unique_ptr<zero::Zero3> zero3_;
  std::unique_ptr<pipeline::PipelineExecutor> executor_;
  std::optional<ddp::NoSyncGuard> no_sync_;  // ZeRO-2 and ZeRO-3
  int64_t reductions_ = 0;  // ZeRO-1's reduce-scatter rounds
};

}  // namespace distlab::train
