// What lessons 06-08 share around data parallelism: models whose weights
// come from a seed (each rank starts from its own, so the broadcast of step
// 1 matters), data every rank derives on its own, and the largest
// difference between two models or between the replicas of one model.
//
// Weights are drawn from a generator of their own, not torch::manual_seed:
// thread ranks share the global generator, and would race for it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "over_ranks.hpp"

namespace distlab::lessons {

// Every parameter uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)] (LibTorch's
// Linear default), fan_in = the last dimension of the layer's weight; biases
// use the previous weight's fan_in.
inline void fill_from_seed(torch::nn::Module& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(seed);
  double bound = 1;
  for (auto& p : model.parameters()) {
    if (p.dim() >= 2) bound = 1 / std::sqrt(static_cast<double>(p.size(-1)));
    p.uniform_(-bound, bound, gen);
  }
}

// Inputs x (rows, in) and targets y (rows, out), the same on every rank.
struct Data {
  at::Tensor x, y;
  // Rows [first, first + count).
  Data rows(int64_t first, int64_t count) const { return {x.narrow(0, first, count), y.narrow(0, first, count)}; }
};
inline Data make_data(int64_t rows, int64_t in, int64_t out, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  Data d;
  d.x = at::randn({rows, in}, gen, at::TensorOptions().dtype(at::kFloat));
  d.y = at::randn({rows, out}, gen, at::TensorOptions().dtype(at::kFloat));
  return d;
}

// max |a - b| over every parameter (the same architecture).
inline double largest_difference(const torch::nn::Module& a, const torch::nn::Module& b) {
  double worst = 0;
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
  return worst;
}

// max |rank r's parameters - rank 0's| over every rank, on every rank: 0
// when the replicas are equal, as data parallelism needs them to stay.
inline double largest_difference_across_ranks(comm::Communicator& comm, const torch::nn::Module& model) {
  std::vector<at::Tensor> flat;
  for (const auto& p : model.parameters()) flat.push_back(p.detach().reshape({-1}));
  at::Tensor mine = at::cat(flat).to(comm.device());
  at::Tensor rank0 = mine.clone();
  comm.native_broadcast(rank0, 0);
  at::Tensor worst = (mine - rank0).abs().max().to(at::kDouble).reshape({1});
  comm.native_all_reduce(worst, comm::ReduceOp::kMax);
  return worst.cpu().item<double>();
}

// run_job already gave each rank its share of the cores (cores / ranks on
// this machine: comm/intra_op_threads.hpp); `requested` > 0 overrides it
// for this rank. Returns the count in use.
inline int share_cores(int requested) {
  if (requested > 0) at::set_num_threads(requested);
  return at::get_num_threads();
}

}  // namespace distlab::lessons
