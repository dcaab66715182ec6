// The seed models with a mixture-of-experts feed-forward
// (models/moe_feed_forward.hpp): with one expert each model is the dense
// one (outputs, and each expert's gradients the dense linear1's and
// linear2's), the auxiliary losses reach the routers through the output
// exactly as an explicit sum would, stages chain to the whole model, and
// bad options are refused.
#include <gtest/gtest.h>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "experts/moe.hpp"
#include "memory/recompute.hpp"
#include "model_test_util.hpp"
#include "models/copy_state.hpp"
#include "models/gpt.hpp"
#include "models/parameter_count.hpp"
#include "models/split.hpp"
#include "models/transformer_lm.hpp"

namespace distlab::models {
namespace {

using testing::max_abs_diff;

TransformerLmOptions lm(int64_t experts, int64_t top_k = 1) {
  TransformerLmOptions o = transformer_lm_preset("tiny", /*ntokens=*/50);
  o.nlayers = 3, o.dropout = 0, o.causal = true;
  o.moe.experts = experts, o.moe.top_k = top_k;
  return o;
}

GptOptions gpt(int64_t experts, int64_t top_k = 1) {
  GptOptions o;
  o.dim = 32, o.n_layers = 2, o.n_heads = 4, o.vocab_size = 40, o.ffn_dim = 48, o.dropout = 0;
  o.moe.experts = experts, o.moe.top_k = top_k;
  return o;
}

const torch::nn::Module& layer_of(const torch::nn::Module& model, int64_t i) {
  return *model.named_children()["layers"]->named_children()[std::to_string(i)];
}

// The dense model and the one-expert model built from the same seed hold
// the same weights (the router draws from its own generator; the expert is
// linear1 and linear2): the same output, and the expert's gradients are
// the dense pair's, transposed. The router's softmax over one expert is 1:
// no gradient reaches it (the balancing loss is the constant 1; no z-loss).
// Equal to float32's rounding: within 8 ulps of the largest entry of `b`
// (the BLAS's kernels add in their own order: 1.4e-6 apart on gradients
// near 10 with AVX-512's, 0 with AVX2's).
bool within_rounding(const at::Tensor& a, const at::Tensor& b) {
  const double largest = std::max(1.0, b.abs().max().item<double>());
  return max_abs_diff(a, b) <= 8 * 1.1920929e-7 * largest;
}

template <typename Model, typename Options, typename Input>
void expect_one_expert_is_dense(Options dense_options, const Input& input, int64_t layers) {
  Options one = dense_options;
  one.moe.experts = 1, one.moe.z_coefficient = 0;
  torch::manual_seed(7);
  Model dense(dense_options);
  torch::manual_seed(7);
  Model moe(one);
  const at::Tensor y_dense = dense(input), y_moe = moe(input);
  EXPECT_TRUE(within_rounding(y_moe, y_dense));
  const at::Tensor probe = torch::randn(y_dense.sizes());
  (y_dense * probe).sum().backward();
  (y_moe * probe).sum().backward();
  for (int64_t i = 0; i < layers; ++i) {
    auto d = layer_of(*dense, i).named_parameters(), m = layer_of(*moe, i).named_parameters();
    EXPECT_FALSE(m.contains("linear1.weight")) << "the dense pair is released";
    EXPECT_TRUE(within_rounding(m["moe.experts.w1"].grad()[0], d["linear1.weight"].grad().t())) << "layer " << i;
    EXPECT_TRUE(within_rounding(m["moe.experts.b1"].grad()[0], d["linear1.bias"].grad()));
    EXPECT_TRUE(within_rounding(m["moe.experts.w2"].grad()[0], d["linear2.weight"].grad().t()));
    EXPECT_TRUE(within_rounding(m["moe.experts.b2"].grad()[0], d["linear2.bias"].grad()));
    EXPECT_TRUE(within_rounding(m["self_attn.in_proj_weight"].grad(), d["self_attn.in_proj_weight"].grad()));
    EXPECT_EQ(m["moe.router.weight"].grad().abs().max().template item<double>(), 0.0);
  }
}

TEST(MoeModels, OneExpertIsTheDenseTransformerLm) {
  torch::manual_seed(1);
  const at::Tensor src = torch::randint(50, {9, 3}, torch::kLong);
  expect_one_expert_is_dense<TransformerLm>(lm(0), src, 3);
}

TEST(MoeModels, OneExpertIsTheDenseGpt) {
  torch::manual_seed(1);
  const at::Tensor tokens = torch::randint(40, {6, 4}, torch::kLong);
  expect_one_expert_is_dense<Gpt>(gpt(0), tokens, 2);
}

// The names: each layer's linear1 and linear2 replaced by moe.router and
// moe.experts, everything else the dense model's, in its order; the
// analytic count equals the allocated one, whole and per stage.
TEST(MoeModels, NamesAndParameterCounts) {
  torch::manual_seed(2);
  TransformerLm dense(lm(0)), moe(lm(4, 2));
  std::vector<std::string> expected;
  for (const std::string& name : testing::parameter_names(*dense)) {
    const bool ff = name.find(".linear1.") != std::string::npos || name.find(".linear2.") != std::string::npos;
    if (!ff) expected.push_back(name);
    if (name.find(".linear2.bias") != std::string::npos) {
      const std::string layer = name.substr(0, name.find(".linear2"));
      for (const char* p : {"moe.router.weight", "moe.experts.w1", "moe.experts.b1", "moe.experts.w2", "moe.experts.b2"})
        expected.push_back(layer + "." + p);
    }
  }
  std::vector<std::string> names = testing::parameter_names(*moe);
  std::sort(names.begin(), names.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  for (const TransformerLmOptions& o : {lm(4, 2), lm(3, 1)})
    for (int64_t stages : {1, 3})
      for (const auto& [first, end] : split_layers(o.nlayers, stages)) {
        TransformerLm stage(o, first, end);
        EXPECT_EQ(count_parameters(o, first, end), count_parameters(*stage)) << "[" << first << ", " << end << ")";
      }
  Gpt g(gpt(4, 2));
  EXPECT_EQ(count_parameters(gpt(4, 2)), count_parameters(*g));
}

// The auxiliary losses joined to the layers' outputs (scale s) give the
// gradients of loss + s * sum of every layer's aux_loss(), written out.
TEST(MoeModels, AuxiliaryLossesReachTheRoutersAsAnExplicitSum) {
  torch::manual_seed(3);
  const at::Tensor src = torch::randint(50, {8, 2}, torch::kLong);
  for (double scale : {1.0, 0.25}) {
    torch::manual_seed(4);
    TransformerLm attached(lm(4, 2));
    torch::manual_seed(4);
    TransformerLm written(lm(4, 2));
    attached->set_aux_loss_scale(scale);
    written->set_aux_loss_scale(0);  // aux_loss() only
    const at::Tensor probe = torch::randn({8, 2, 50});
    (attached(src) * probe).sum().backward();
    at::Tensor loss = (written(src) * probe).sum();
    for (const auto& moe : written->moes()) loss = loss + moe->aux_loss() * scale;
    loss.backward();
    const auto a = attached->named_parameters(), w = written->named_parameters();
    double worst = 0, router = 0;
    for (const auto& item : a) {
      worst = std::max(worst, max_abs_diff(item.value().grad(), w[item.key()].grad()));
      if (item.key().find("router") != std::string::npos) router = std::max(router, item.value().grad().abs().max().item<double>());
    }
    EXPECT_LE(worst, 1e-6) << "scale " << scale;
    EXPECT_GT(router, 0) << "the routers got no gradient";
  }
}

// Stages built alone with the whole model's weights chain to its logits;
// layers handed over (to be cut across a tensor group) carry their experts
// as their "moe" module, the very modules moes() lists, and leave the
// model without them.
TEST(MoeModels, StagesChainToTheWholeModelAndReleasedLayersCarryTheirExperts) {
  torch::manual_seed(5);
  TransformerLm whole(lm(4, 2));
  const at::Tensor src = torch::randint(50, {7, 3}, torch::kLong);
  torch::NoGradGuard no_grad;
  const at::Tensor expected = whole(src);
  at::Tensor x = src;
  for (const auto& [first, end] : split_layers(3, 2)) {
    TransformerLm stage(lm(4, 2), first, end);
    copy_state_by_name(*whole, *stage);
    x = stage(x);
  }
  EXPECT_LE(max_abs_diff(x, expected), 1e-5);
  const auto layers = whole->release_layers();
  ASSERT_EQ(layers.size(), whole->moes().size());
  for (size_t k = 0; k < layers.size(); ++k) {
    std::shared_ptr<torch::nn::Module> moe;
    for (const auto& child : layers[k]->named_children())
      if (child.key() == "moe") moe = child.value();
    EXPECT_EQ(moe.get(), static_cast<torch::nn::Module*>(whole->moes()[k].get())) << "layer " << k;
  }
  for (const auto& item : whole->named_parameters())
    EXPECT_EQ(item.key().find("layers."), std::string::npos) << item.key() << " stayed with the model";
}

// Layers with experts recomputed (full, selective) give the plain model's
// output and every gradient bit for bit, the routers' through the
// auxiliary losses included, and count each forward's tokens once (not
// again in the recomputation); matmuls (the layer's own products kept) is
// refused.
TEST(MoeModels, RecomputedLayersWithExpertsAreThePlainModelBitForBit) {
  torch::manual_seed(3);
  const at::Tensor src = torch::randint(50, {8, 2}, torch::kLong);
  const at::Tensor probe = torch::randn({8, 2, 50});
  struct Run {
    std::map<std::string, at::Tensor> values;
    std::vector<std::vector<int64_t>> kept;
  };
  auto run = [&](memory::Recompute policy) {
    TransformerLmOptions o = lm(4, 2);
    o.moe.z_coefficient = 0.01;
    o.recompute = policy;
    torch::manual_seed(4);
    TransformerLm model(o);
    Run r;
    const at::Tensor y = model(src);
    (y * probe).sum().backward();
    r.values["output"] = y.detach();
    for (const auto& item : model->named_parameters()) r.values[item.key()] = item.value().grad();
    for (const auto& moe : model->moes()) r.kept.push_back(moe->take_step_counts().kept);
    return r;
  };
  const Run plain = run(memory::Recompute::kNone);
  int64_t assignments = 0;
  for (const auto& layer : plain.kept)
    for (int64_t k : layer) assignments += k;
  EXPECT_EQ(assignments, 3 * 8 * 2 * 2) << "layers x tokens x top-k, every assignment kept (dropless)";
  for (const memory::Recompute policy : {memory::Recompute::kFull, memory::Recompute::kSelective}) {
    const int64_t before = memory::regions_recomputed();
    const Run again = run(policy);
    EXPECT_EQ(memory::regions_recomputed() - before, 3) << "one region a layer";
    ASSERT_EQ(again.values.size(), plain.values.size());
    for (const auto& [name, value] : plain.values) {
      ASSERT_TRUE(value.defined() && again.values.at(name).defined()) << name;
      EXPECT_TRUE(torch::equal(value, again.values.at(name))) << memory::to_string(policy) << ": " << name;
    }
    EXPECT_EQ(again.kept, plain.kept) << memory::to_string(policy) << ": tokens counted again in the recomputation";
  }
  TransformerLmOptions o = lm(4, 2);
  o.recompute = memory::Recompute::kMatmuls;
  EXPECT_THROW(TransformerLm{o}, std::invalid_argument);
}

TEST(MoeModels, BadOptionsAreRefused) {
  EXPECT_THROW(TransformerLm(lm(4, 5)), std::invalid_argument);  // k > E
  EXPECT_THROW(TransformerLm(lm(-1)), std::invalid_argument);
  EXPECT_THROW(Gpt(gpt(2, 0)), std::invalid_argument);
  try {
    TransformerLm m(lm(2, 3));
    FAIL() << "k 3 of 2 experts was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--top-k 3 must be in [1, 2]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distlab::models
