// Lesson 14's job without the communication: the tiny model, where its
// weights come from, each step's batch and each rank's share of it, and the
// collectives' numbers. The test (tests/lessons/hang_lesson_test.cpp) trains
// the same model on the same batches in one process, with a loop of its own,
// to hold the lesson's losses to; so nothing here touches a communicator.
//
// The numbers: every collective of a group gets the group's next sequence
// number, counted alike on every rank (lib/flight/entry.hpp). The job calls
//   #0      broadcast   rank 0's initial weights
//   #2s-1   all_reduce  the gradients of step s (s = 1, 2, ...)
//   #2s     reduce      the loss of step s, to rank 0
// so step s's gradient all-reduce is #2s-1 on every rank of a correct run.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace distlab::lesson14 {

inline constexpr int64_t kInputs = 8;
inline constexpr int64_t kHidden = 16;
inline constexpr int64_t kParameters = kInputs * kHidden + kHidden + kHidden + 1;  // 161

// The sequence numbers of step s's collectives in group "world".
inline uint64_t gradients_seq(int step) { return 2 * static_cast<uint64_t>(step) - 1; }
inline uint64_t loss_seq(int step) { return 2 * static_cast<uint64_t>(step); }

// 8 -> 16 -> 1, tanh: 161 parameters.
inline torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Linear(kInputs, kHidden), torch::nn::Tanh(),
                               torch::nn::Linear(kHidden, 1));
}

// Rank r draws its first weights from seed 1400 + r, as separate processes
// would; the broadcast (#0) gives every rank rank 0's. A generator of its own:
// thread ranks share the global one.
inline uint64_t weight_seed(int rank) { return 1400 + static_cast<uint64_t>(rank); }

inline void fill_weights(torch::nn::Sequential& model, int rank) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(weight_seed(rank));
  double bound = 1;  // LibTorch's Linear default: uniform in +-1/sqrt(fan_in); a bias takes its weight's
  for (auto& p : model->parameters()) {
    if (p.dim() >= 2) bound = 1 / std::sqrt(static_cast<double>(p.size(-1)));
    p.uniform_(-bound, bound, gen);
  }
}

struct Batch {
  at::Tensor x, y;  // (rows, 8), (rows, 1)
};

// Step s's whole batch, the same on every rank: y = sin(x . w) + noise.
// A small data set: every step takes the same rows (in another order each
// step, which the mean loss does not see; each rank's share does).
inline Batch batch_of_step(int step, int64_t rows) {
  auto gen = at::detail::createCPUGenerator(1400);
  const auto options = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor w = at::linspace(-1, 1, kInputs, options).view({kInputs, 1});
  Batch b;
  b.x = at::randn({rows, kInputs}, gen, options);
  b.y = at::sin(b.x.matmul(w)) + 0.1 * at::randn({rows, 1}, gen, options);
  const at::Tensor order = at::randperm(rows, at::detail::createCPUGenerator(1400 + static_cast<uint64_t>(step)),
                                        at::TensorOptions().dtype(at::kLong));
  return {b.x.index_select(0, order), b.y.index_select(0, order)};
}

// Rank r of p trains on rows [r rows/p, (r+1) rows/p) of the batch.
inline Batch share_of(const Batch& whole, int rank, int ranks) {
  const int64_t rows = whole.x.size(0) / ranks;
  return {whole.x.narrow(0, rank * rows, rows), whole.y.narrow(0, rank * rows, rows)};
}

// Every parameter's gradient in one vector, in parameters() order; without
// the last parameter (the output bias, 1 element) when `drop_last`.
inline at::Tensor flat_gradients(torch::nn::Sequential& model, bool drop_last = false) {
  std::vector<at::Tensor> pieces;
  for (const auto& p : model->parameters()) pieces.push_back(p.grad().reshape({-1}));
  if (drop_last) pieces.pop_back();
  return at::cat(pieces);
}

// p -= lr * g, g read from `flat` in parameters() order (as far as it goes).
inline void sgd_step(torch::nn::Sequential& model, const at::Tensor& flat, double lr) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : model->parameters()) {
    if (offset + p.numel() > flat.numel()) break;
    p.sub_(lr * flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

}  // namespace distlab::lesson14
