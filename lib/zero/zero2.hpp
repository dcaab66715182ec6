// ZeRO stage 2: gradients are sharded too. Each rank keeps whole parameters,
// 1/p of the optimizer state, and between steps only 1/p of the gradient.
//
//   zero::Zero2 zero(comm, *model, zero::sgd(torch::optim::SGDOptions(0.1).momentum(0.9)));
//   zero.zero_grad();
//   loss_fn(model->forward(x), y).backward();   // buckets reduce-scattered as they fill
//   zero.clip_grad_norm(1.0);                     // optional: the norm over all shards
//   zero.step();                                  // step my shard, all-gather
//
// During backward, as in DDP (ddp/reducer.hpp): each parameter's gradient
// accumulator fires a post hook once its gradient is final in .grad; the
// hook copies gradient / p into the parameter's slot of its bucket and
// drops the .grad (the whole point: the full gradient is not kept). When a
// bucket's last slot is filled the bucket is reduce-scattered on the comm
// thread, in bucket order, while backward computes earlier layers; the rank
// adds its chunk of the average to its shard's .grad and the bucket's
// buffer is freed. Before the next bucket's buffer is made, the launched
// buckets' reduce-scatters are awaited: one in flight at most, and what a
// backward holds does not depend on the comm thread's pace. At the end of
// backward a callback waits for every bucket.
// Each reduce-scatter's span carries "grads pending at submit": how many
// gradients backward had still to produce when the bucket was queued.
// Buckets are packed last layer first, the order backward reaches them.
//
// Gradient accumulation, two ways:
//   { auto guard = zero.no_sync(); loss.backward(); }   // k-1 micro-steps: no traffic,
//   loss.backward();                                     // .grad sums; the k-th reduces the sum
// or a plain backward per micro-step: each reduce-scatters and adds its
// average into the shard's .grad, so only the shard is ever kept (one
// reduce-scatter per micro-step instead of one per step).
//
// A parameter whose hook did not fire in a synchronized backward (unused
// this step) is reduced with what its .grad holds from no_sync micro-steps,
// or as zero, so the other ranks' reduce-scatters complete.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <utility>

#include "ddp/grad_ready_hooks.hpp"
#include "ddp/no_sync_guard.hpp"
#include "zero/sharded_optimizer.hpp"

namespace distlab::zero {

struct Zero2Stats {
  int64_t synced_steps = 0;     // backwards that reduce-scattered
  int64_t reduce_scatters = 0;  // bucket reduce-scatters launched
  int64_t bytes = 0;            // bytes of the buckets reduce-scattered
};

struct GradShardState;

class Zero2 {
 public:
  // Every rank of `comm` (the world or a group) calls it with the same model.
  Zero2(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
        ZeroOptions options = {});
  ~Zero2();
  Zero2(const Zero2&) = delete;
  Zero2& operator=(const Zero2&) = delete;

  // Zeroes the shard's .grad and drops any parameter's .grad.
  void zero_grad();
  double clip_grad_norm(double max_norm);
  void step();

  // While the guard lives, backward leaves gradients in .grad without any
  // communication; the next backward outside it reduces the sum.
  using NoSync = ddp::NoSyncGuard;
  NoSync no_sync();

  ShardedOptimizer& sharded() { return sharded_; }
  const ShardLayout& layout() const { return sharded_.layout(); }
  Zero2Stats stats() const;

 private:
  // Throws if a synchronized backward began reducing and never ended.
  void check_reduced() const;

  ShardedOptimizer sharded_;
  std::shared_ptr<GradShardState> state_;  // after sharded_: destroyed first
  std::unique_ptr<ddp::GradReadyHooks> hooks_;  // each calls state_->on_grad_ready
};

}  // namespace distlab::zero
