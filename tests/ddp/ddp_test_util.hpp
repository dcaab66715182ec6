// Shared by the DDP tests: a small model, data every rank derives on its
// own, and a single-process reference run.
#pragma once

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <ATen/CPUGeneratorImpl.h>

#include <memory>
#include <string>

#include "compat/torch.hpp"
#include "support/differences.hpp"

namespace distlab::ddp::testing {

inline torch::nn::Sequential make_model(int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  return torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Linear(32, 32),
                               torch::nn::Tanh(), torch::nn::Linear(32, 4));
}

// Copies `from`'s parameters into `to` (same architecture).
inline void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& item : to.named_parameters()) item.value().copy_(src[item.key()]);
}

// The largest |a - b| over the parameters of two models of one architecture;
// +infinity when a parameter holds a NaN (support/differences.hpp).
inline double max_difference(const torch::nn::Module& a, const torch::nn::Module& b) {
  test_support::Worst worst;
  auto other = b.named_parameters();
  for (const auto& item : a.named_parameters()) worst.add(item.value(), other[item.key()]);
  return worst.value;
}

// Inputs (rows, 8) and targets (rows, 4) from a fixed seed: every rank can
// make the whole data set and take its own rows.
struct Data {
  at::Tensor x, y;
};
inline Data make_data(int64_t rows, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  Data d;
  d.x = at::randn({rows, 8}, gen, at::TensorOptions().dtype(at::kFloat));
  d.y = at::randn({rows, 4}, gen, at::TensorOptions().dtype(at::kFloat));
  return d;
}

enum class Opt { kSgd, kAdam };

inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(torch::nn::Module& model, Opt opt) {
  if (opt == Opt::kSgd) return std::make_unique<torch::optim::SGD>(model.parameters(), torch::optim::SGDOptions(0.1));
  return std::make_unique<torch::optim::Adam>(model.parameters(), torch::optim::AdamOptions(0.01));
}

inline at::Tensor loss_of(torch::nn::Sequential& model, const at::Tensor& x, const at::Tensor& y) {
  return torch::nn::functional::mse_loss(model->forward(x), y);
}

// One process on the whole batch: step s uses rows [s*rows, (s+1)*rows) of `data`.
inline void train_single(torch::nn::Sequential& model, const Data& data, int64_t rows_per_step, int steps, Opt opt) {
  auto optimizer = make_optimizer(*model, opt);
  for (int s = 0; s < steps; ++s) {
    compat::zero_grad(*optimizer);
    auto x = data.x.narrow(0, s * rows_per_step, rows_per_step);
    auto y = data.y.narrow(0, s * rows_per_step, rows_per_step);
    loss_of(model, x, y).backward();
    optimizer->step();
  }
}

}  // namespace distlab::ddp::testing
