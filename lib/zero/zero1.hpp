// ZeRO stage 1: every rank keeps whole parameters and one whole gradient,
// and 1/p of the optimizer state.
//
//   zero::Zero1 zero(comm, *model, zero::adam(torch::optim::AdamOptions(1e-3)));
//   zero.zero_grad();
//   loss_fn(model->forward(x), y).backward();   // local gradients: no traffic
//   zero.clip_grad_norm(1.0);                     // optional: the norm over all shards
//   zero.step();
//
// The gradient lives in one flat buffer per bucket (shard_layout.hpp), laid
// out as the parameters' own flat buffer: every parameter's .grad is its
// slot of it, so backward accumulates straight into the buffer, and the
// shard's .grad is my chunk's range of it. step(), bucket by bucket:
//   1. divide the buffer by p and reduce-scatter it in place: my chunk,
//      which is the shard's .grad, becomes the average over the ranks;
//   2. step the shard (sharded_optimizer.hpp);
//   3. all-gather the flat parameters: every rank has the whole update.
// Nothing is copied, and the gradient exists once: Psi elements, as the
// paper counts it (memory.hpp). After step(), the parts of each .grad
// outside my chunk hold what the reduce-scatter left there (on the ring,
// partial sums), not a gradient: zero_grad() before the next backward, as
// always.
// A reduce-scatter and an all-gather are the two halves of DDP's ring
// all-reduce: the same bytes as DDP, for 1/p of its optimizer state. None of
// it overlaps backward; Zero2 does that.
//
// Gradient accumulation needs no guard here: backward never communicates,
// so k backwards sum their gradients in the buffer and the step reduces the
// sum. A .grad that user code replaced is copied into its slot before the
// reduce-scatter (an undefined one counts as zeros), and is its slot again.
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

  // Zeroes the gradient buffers: every parameter's .grad (its slot) and the
  // shard's (my chunks) are zero, ready for backward to accumulate into.
  void zero_grad();
  // Reduce-scatters the gradient buffers now (step() and clip_grad_norm() do
  // it when it has not been done since the last step).
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
