// ZeRO stage 3 / FSDP: the parameters are sharded too. Between uses each
// rank holds 1/p of every parameter, 1/p of the gradient and 1/p of the
// optimizer state; a unit's whole parameters exist only while it computes.
//
//   torch::nn::Sequential model(Linear(...), Tanh(), Linear(...), ...);
//   zero::Zero3 zero(comm, model, zero::adam(torch::optim::AdamOptions(1e-3)));
//   zero.zero_grad();
//   loss_fn(zero.forward(x), y).backward();
//   zero.step();                                  // steps my shard: nothing is gathered
//
// A unit is one child of the Sequential that has parameters (FSDP wraps
// each Transformer layer the same way); children without parameters just
// run. Unit u's parameters are one flat buffer, cut into p chunks by the
// collectives' chunk rule; rank r keeps chunk r of every unit (its shard)
// and the parameters are views into the buffer, whose bytes come and go
// (storage.hpp):
//
//   forward of unit u     wait for u's all-gather (launched earlier, or now),
//                         launch u+1's (prefetch: it runs on the comm thread
//                         while u computes), run u, free u's buffer
//   backward reaches u    (a hook on u's output) wait for u's all-gather,
//                         launch u-1's, and u's backward runs
//   u's gradients final   (the parameters' accumulator hooks) the previous
//                         unit's reduce-scatter awaited (one in flight),
//                         u's gradients / p flattened and reduce-scattered
//                         on the comm thread into the shard's .grad, .grad
//                         dropped, u's buffer freed
//
// Every rank gathers and reduces in the same order (forward 0, 1, ..., then
// backward L-1, ..., 0), so the comm thread's queue is the same everywhere.
// Per step: all-gather forward (Psi), all-gather backward (Psi),
// reduce-scatter (Psi): 3 Psi against DDP's 2 Psi, for parameters that take
// 1/p of the memory. With prefetch off, each all-gather is launched when
// its unit needs it, and compute waits for the whole transfer. Each
// all-gather's span says how many units' forwards (or backwards) of the
// pass had begun when it was queued, "forwards begun at submit": u for
// unit u+1's prefetch, queued before unit u computes; u+1 without prefetch.
//
// Accumulation: a backward under no_sync() keeps each unit's gradient in
// .grad (whole: the memory ZeRO-3 otherwise saves); the next backward
// outside it reduce-scatters the sum. Or a plain backward per micro-step,
// each reduce-scattering into the shard's .grad.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddp/grad_ready_hooks.hpp"
#include "ddp/no_sync_guard.hpp"
#include "zero/sharded_optimizer.hpp"

namespace distlab::zero {

struct Zero3Options {
  collectives::Algorithm algorithm = collectives::Algorithm::kRing;
  int tag = 0;
  // Launch unit u+1's all-gather (u-1's in backward) before unit u computes.
  bool prefetch = true;
};

struct Zero3Stats {
  int64_t all_gathers = 0;      // unit all-gathers launched (forward and backward)
  int64_t gathered_bytes = 0;   // bytes of the unit buffers all-gathered
  int64_t reduce_scatters = 0;  // unit reduce-scatters launched
  int64_t reduced_bytes = 0;    // bytes of the gradients reduce-scattered
  int64_t synced_steps = 0;     // backwards that reduce-scattered
  int max_gathered_units = 0;   // the most units ever whole at once
};

struct Zero3State;

class Zero3 {
 public:
  // Every rank of `comm` (the world or a group) calls it with the same model.
  Zero3(comm::Communicator& comm, torch::nn::Sequential model, const OptimizerFactory& make_optimizer,
        Zero3Options options = {});
  ~Zero3();
  Zero3(const Zero3&) = delete;
  Zero3& operator=(const Zero3&) = delete;

  // The model's forward, unit by unit, gathering and freeing as it goes.
  at::Tensor forward(const at::Tensor& input);
  // Zeroes the shard's .grad and drops any parameter's .grad.
  void zero_grad();
  double clip_grad_norm(double max_norm);
  // Steps this rank's shard. The parameters stay sharded until the next forward.
  void step();

  using NoSync = ddp::NoSyncGuard;
  NoSync no_sync();

  // Every parameter whole, in registration order (copies; every rank calls
  // it: the units are all-gathered). For checks, checkpoints and evaluation.
  std::vector<at::Tensor> full_parameters();

  // Every unit whole while the guard lives, as FSDP's summon_full_params:
  // the model's own parameters hold their whole values, to evaluate (each
  // forward then runs without traffic), read, checkpoint or load into.
  // When it ends, each rank copies its chunk of every unit back into its
  // shard (what was loaded is kept) and frees the units. Every rank of the
  // group takes it, between steps; step() refuses to run inside it.
  class WholeParameters {
   public:
    explicit WholeParameters(std::shared_ptr<Zero3State> state);
    WholeParameters(WholeParameters&& other) noexcept : state_(std::move(other.state_)) {}
    WholeParameters(const WholeParameters&) = delete;
    WholeParameters& operator=(const WholeParameters&) = delete;
    WholeParameters& operator=(WholeParameters&&) = delete;
    ~WholeParameters();

   private:
    std::shared_ptr<Zero3State> state_;
  };
  WholeParameters whole_parameters();

  int units() const;
  // The child of the Sequential that unit u is, and its name.
  const std::string& unit_name(int unit) const;
  // Whether unit u's buffer holds its whole parameters now.
  bool gathered(int unit) const;
  ShardedOptimizer& sharded() { return sharded_; }
  const ShardLayout& layout() const { return sharded_.layout(); }
  // The Sequential it runs (its parameters are views of freed buffers between uses).
  torch::nn::Sequential model() const { return model_; }
  Zero3Stats stats() const;

 private:
  void check_idle(const char* what) const;
  // Throws std::logic_error when a WholeParameters guard lives; `why` says what it would break.
  void refuse_inside_whole(const std::string& why) const;

  torch::nn::Sequential model_;
  std::vector<int> unit_of_child_;  // per child of the Sequential: its unit, or -1 (no trainable parameters)
  ShardedOptimizer sharded_;
  std::shared_ptr<Zero3State> state_;  // after sharded_: destroyed first
  std::unique_ptr<ddp::GradReadyHooks> hooks_;  // each calls state_->on_grad_ready
};

}  // namespace distlab::zero
