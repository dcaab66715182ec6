// ZeRO stage 1: every rank keeps whole parameters and whole gradients, and
// 1/p of the optimizer state.
//
//   zero::Zero1 zero(comm, *model, zero::adam(torch::optim::AdamOptions(1e-3)));
//   zero.zero_grad();
//   loss_fn(model->forward(x), y).backward();   // local gradients: no traffic
//   zero.clip_grad_norm(1.0);                     // optional: the norm over all shards
//   zero.step();
//
// step(), bucket by bucket (shard_layout.hpp):
//   1. reduce-scatter the flat gradient, divided by p: rank r gets the
//      average of chunk r, into its shard's .grad;
//   2. step the shard (sharded_optimizer.hpp);
//   3. all-gather the flat parameters: every rank has the whole update.
// A reduce-scatter and an all-gather are the two halves of DDP's ring
// all-reduce: the same bytes as DDP, for 1/p of its optimizer state. None of
// it overlaps backward; Zero2 does that.
//
// Gradient accumulation needs no guard here: backward never communicates,
// so k backwards sum their gradients in .grad and the step reduces the sum.
// naive_zero.hpp is the one-screen version this is tested against.
#pragma once

#include <torch/nn/module.h>

#include "zero/sharded_optimizer.hpp"

namespace distlab::zero {

class Zero1 {
 public:
  // Every rank of `comm` (the world or a group) calls it with the same model.
  Zero1(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
        ZeroOptions options = {});

  // Drops every parameter's .grad (backward makes fresh ones) and zeroes the shard's.
  void zero_grad();
  // Reduce-scatters the gradients now (step() and clip_grad_norm() do it
  // when it has not been done since the last step).
  void reduce_gradients();
  double clip_grad_norm(double max_norm);
  void step();

  ShardedOptimizer& sharded() { return sharded_; }
  const ShardLayout& layout() const { return sharded_.layout(); }

 private:
  ShardedOptimizer sharded_;
  bool reduced_ = false;
};

}  // namespace distlab::zero
