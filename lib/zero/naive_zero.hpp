// ZeRO-1 in one screen: the reference Zero1 and Zero2 are tested against.
// No buckets, no reduce-scatter, no hooks: every rank gets the whole
// averaged gradient, steps only its slice of the parameters, and the slices
// are gathered.
//
//   NaiveZero1 zero(comm, *model, zero::adam(torch::optim::AdamOptions(1e-3)));
//   loss.backward();   // local gradients
//   zero.step();       // 1. all-reduce  2. step my slice  3. all-gather
//
// The optimizer state is the slice's, 1/p of it, as in ZeRO-1; but the
// gradient traffic is DDP's whole all-reduce and the all-gather comes on
// top: 1.5x the bytes of Zero1, which reduce-scatters instead.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"
#include "zero/optimizer_factory.hpp"

namespace distlab::zero {

class NaiveZero1 {
 public:
  NaiveZero1(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
             collectives::Algorithm all_reduce = collectives::Algorithm::kNative,
             collectives::Algorithm all_gather = collectives::Algorithm::kNative);

  void zero_grad();
  // max_grad_norm > 0: clips the gradient to that global norm first (every
  // rank holds the whole gradient, so the norm needs no message).
  void step(double max_grad_norm = 0);

  const at::Tensor& slice() const { return slice_; }  // (mine.count,) this rank's parameters
  collectives::Range mine() const { return mine_; }    // its place among the n flat elements

 protected:
  void reduce_and_step_slice(double max_grad_norm);  // 1. and 2.
  void gather_into_parameters();                     // 3.

  comm::Communicator& comm_;
  std::vector<at::Tensor> params_;
  collectives::Algorithm all_reduce_, all_gather_;
  int64_t n_ = 0;
  collectives::Range mine_;
  at::Tensor slice_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// ZeRO-3 in one screen: naive ZeRO-1 whose parameters exist only from
// gather() to step(). Between steps each rank holds its slice and nothing
// else; the whole model is gathered for the whole forward and backward.
// (Zero3 gathers one unit at a time, twice, and frees it after use.)
//
//   NaiveZero3 zero(comm, *model, factory);
//   zero.gather();       // all-gather the whole model into the parameters
//   loss.backward();
//   zero.step();         // all-reduce, step my slice, free the parameters
class NaiveZero3 : public NaiveZero1 {
 public:
  NaiveZero3(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
             collectives::Algorithm algorithm = collectives::Algorithm::kNative);
  void gather();
  void step(double max_grad_norm = 0);

 private:
  void release();
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace distlab::zero
