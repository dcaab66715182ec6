// The capstone's stages with their layers cut across a tensor group
// (train/cut_layers.hpp, through RankStage), against the unsplit model
// built from the same seed: the tiny preset (2 layers, 2 heads), causal,
// dropout 0, as one stage and as two stages chained by hand, on 1 and 2
// thread ranks of a tensor group. Logits, and the gradient of every
// parameter of the whole model (gathered by whole_gradients()), equal the
// unsplit model's to float32 rounding; whole_parameters() is the unsplit
// model's state bit for bit, and load_whole_state() of another model's
// state gives that one back; the whole model's gradient norm (its shares
// by placement) and the clipped gradients are one process's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>

#include "capstone_runs.hpp"
#include "comm/threads_backend.hpp"
#include "support/differences.hpp"
#include "collectives/grad_norm.hpp"
#include "train/stage_model.hpp"

namespace distlab::train {
namespace {

models::TransformerLmOptions tiny() {
  models::TransformerLmOptions o = models::transformer_lm_preset("tiny", /*ntokens=*/40);
  o.dropout = 0;
  o.causal = true;
  return o;
}

std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : parameters) out.push_back(p.grad());
  return out;
}


class TensorStage : public ::testing::TestWithParam<std::pair<int, int>> {};  // (stages, tensor size)

TEST_P(TensorStage, EqualsTheUnsplitModel) {
  const auto [stages, t] = GetParam();
  const models::TransformerLmOptions o = tiny();
  // The reference: the whole model, one process.
  models::TransformerLm whole = build_stage(o, 0, 1, /*seed=*/3);
  const at::Tensor tokens = at::randint(o.ntokens, {9, 4}, at::kLong);
  const at::Tensor targets = at::randint(o.ntokens, {9, 4}, at::kLong);
  const at::Tensor logits = whole(tokens);
  at::cross_entropy_loss(logits.reshape({-1, o.ntokens}), targets.reshape({-1})).backward();
  std::map<std::string, at::Tensor> grads;
  for (const auto& item : whole->named_parameters()) grads[item.key()] = item.value().grad().clone();
  // The clipped gradients too: a max norm below the norm, so that clipping scales.
  constexpr double kMaxNorm = 0.1;
  const double norm = collectives::clip_grad_norm({{gradients_of(whole->parameters()), {}}}, kMaxNorm);  // one process: one share
  ASSERT_TRUE(test_support::exceeds(norm, kMaxNorm)) << "gradient norm " << norm << ": clipping would not engage";
  std::map<std::string, at::Tensor> clipped;
  for (const auto& item : whole->named_parameters()) clipped[item.key()] = item.value().grad();
  ASSERT_TRUE(test_support::exceeds(tests::largest_state_difference(clipped, grads), 0.0))
      << "clipping left the gradients as they were";
  std::map<std::string, at::Tensor> weights;  // the parameters (named_state would add the positional buffer)
  for (const auto& item : whole->named_parameters()) weights[item.key()] = item.value().detach();
  std::map<std::string, at::Tensor> other;  // another model's state, to load
  for (const auto& [name, value] : weights) other[name] = value + 0.01;

  std::mutex mutex;
  test_support::Worst worst_logits, worst_grads, worst_weights, worst_loaded, worst_norm, worst_clipped;
  const int stages_ = stages;
  comm::run_thread_ranks(t, [&](comm::Communicator& tensor) {
    std::vector<std::unique_ptr<RankStage>> chain;
    for (int s = 0; s < stages_; ++s)
      chain.push_back(std::make_unique<RankStage>(build_stage(o, s, stages_, /*seed=*/3), tensor));
    at::Tensor h = tokens;
    for (auto& stage : chain) h = stage->forward(h);
    at::cross_entropy_loss(h.reshape({-1, o.ntokens}), targets.reshape({-1})).backward();
    // Copies: outside the cut layers these share the stage's storage, which clipping and loading change.
    std::map<std::string, at::Tensor> my_grads, my_weights;
    for (auto& stage : chain) {
      for (const auto& [name, value] : stage->whole_gradients()) my_grads[name] = value.clone();
      for (const auto& [name, value] : stage->whole_parameters()) my_weights[name] = value.clone();
    }
    // The whole model's norm: the chained stages' parameters together, the
    // pipeline group a group of one (these stages all live on this rank).
    std::vector<at::Tensor> replicated, split;
    for (auto& stage : chain) {
      for (const at::Tensor& p : stage->parameters_placed(Placement::kReplicated)) replicated.push_back(p.grad());
      for (const at::Tensor& p : stage->parameters_placed(Placement::kCut)) split.push_back(p.grad());
    }
    if (tensor.size() > 1 && split.empty()) ADD_FAILURE() << "no parameter cut over the tensor group";
    auto solo = tensor.split(tensor.rank(), 0, "alone");
    const double my_norm = collectives::clip_grad_norm({{replicated, {}}, {split, {&tensor}}}, kMaxNorm, solo.get());
    std::map<std::string, at::Tensor> my_clipped;
    for (auto& stage : chain) my_clipped.merge(stage->whole_gradients());
    std::map<std::string, at::Tensor> loaded;
    for (auto& stage : chain) {
      std::map<std::string, at::Tensor> mine = stage->whole_state();  // the buffers as they are
      for (auto& [name, value] : mine)
        if (other.count(name)) value = other.at(name);
      stage->load_whole_state(mine);
      loaded.merge(stage->whole_parameters());
    }
    std::lock_guard<std::mutex> lock(mutex);
    worst_logits.add(h, logits);
    worst_grads.add(tests::largest_state_difference(my_grads, grads));
    worst_weights.add(tests::largest_state_difference(my_weights, weights));
    worst_loaded.add(tests::largest_state_difference(loaded, other));
    worst_norm.add((my_norm - norm) / norm);
    worst_clipped.add(tests::largest_state_difference(my_clipped, clipped));
  });
  EXPECT_LT(worst_norm.value, 1e-5) << "the whole model's gradient norm (" << norm << ")";
  EXPECT_LT(worst_clipped.value, 1e-6) << "the clipped gradients";
  EXPECT_LT(worst_logits.value, 1e-5);
  EXPECT_LT(worst_grads.value, 1e-5);
  EXPECT_EQ(worst_weights.value, 0.0) << "the unsplit state, bit for bit";
  EXPECT_EQ(worst_loaded.value, 0.0) << "another model's state loaded and gathered back";
  std::printf("  %d stage(s) x tensor %d: largest difference from the unsplit model: logits %.3g, gradients %.3g\n",
              stages, t, worst_logits.value, worst_grads.value);
}

INSTANTIATE_TEST_SUITE_P(Capstone, TensorStage,
                         ::testing::Values(std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "_stages_tensor_" +
                                  std::to_string(info.param.second);
                         });

}  // namespace
}  // namespace distlab::train
