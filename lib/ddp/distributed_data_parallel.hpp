// DistributedDataParallel: the slides' five steps, made fast.
//
//   1. at construction, every rank checks that all ranks hold the same
//      parameters (names, shapes, dtypes), then takes rank 0's parameters
//      and buffers (broadcast): every replica starts equal;
//   2. each rank runs forward and backward on its own share of the batch;
//   3. during backward, gradients are averaged across ranks in buckets
//      (reducer.hpp), overlapping the communication with the computation;
//   4. the optimizer steps on equal gradients, so the replicas stay equal;
//   5. repeat. Buffers (e.g. BatchNorm's running statistics) are taken from
//      rank 0 again before each forward, as PyTorch's broadcast_buffers.
//
//   ddp::DistributedDataParallel ddp(comm, model.ptr());
//   at::Tensor loss = ddp.forward([&] { return loss_fn(model->forward(x), y); });
//   loss.backward();             // returns with averaged gradients in .grad
//   optimizer.step();
//
//   { auto guard = ddp.no_sync();            // k-1 micro-steps: no traffic,
//     ddp.forward(...).backward(); }          // gradients pile up in .grad
//   ddp.forward(...).backward();              // the k-th synchronizes the sum
//
// The communicator may be a group (comm.split): the capstone runs one DDP
// per pipeline stage, among that stage's replicas. naive_data_parallel.hpp
// is the one-screen version without buckets or overlap.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "ddp/reducer.hpp"
#include "ddp/replicas.hpp"
#include "ddp/no_sync_guard.hpp"

namespace distlab::ddp {

struct DdpOptions : ReducerOptions {
  bool broadcast_buffers = true;  // rank 0's buffers before every forward
  // Parameters DDP leaves alone, by name: neither broadcast nor averaged
  // (PyTorch's _set_params_and_buffers_to_ignore_for_model). Experts spread
  // over the replicas are averaged otherwise (experts/moe.hpp).
  std::set<std::string> ignored;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(comm::Communicator& comm, std::shared_ptr<torch::nn::Module> module,
                          DdpOptions options = {});

  // Runs fn() (the forward, and usually the loss) after the per-step set-up:
  // buffers from rank 0, bucket rebuild, and whether the coming backward
  // synchronizes. Returns what fn returns.
  template <typename Fn>
  decltype(auto) forward(Fn&& fn) {
    prepare_forward();
    return std::forward<Fn>(fn)();
  }
  // The same set-up without wrapping a call (for callers that run the
  // forward elsewhere, e.g. a pipeline stage).
  void prepare_forward();

  // While the guard lives, backward leaves gradients in .grad without any
  // communication; the first synchronized backward after it averages the sum.
  using NoSync = NoSyncGuard;
  NoSync no_sync() {
    return NoSync([this](bool sync) { sync_ = sync; });
  }

  torch::nn::Module& module() { return *module_; }
  comm::Communicator& comm() { return comm_; }
  Reducer& reducer() { return *reducer_; }
  const BucketPlan& bucket_plan() const { return reducer_->plan(); }
  ReducerStats stats() const { return reducer_->stats(); }
  const std::vector<std::string>& parameter_names() const { return names_; }

 private:
  comm::Communicator& comm_;
  std::shared_ptr<torch::nn::Module> module_;
  DdpOptions options_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> buffers_;
  std::unique_ptr<Reducer> reducer_;
  bool sync_ = true;
};

}  // namespace distlab::ddp
