// The mixture-of-experts layer (moe_local, experts/moe.hpp) against its
// formula written out here in plain loops, token by token, in double:
//
//   y_t = sum over t's kept choices j of  w_tj * expert_{e_tj}(x_t)
//   expert_e(x) = relu(x W1_e + b1_e) W2_e + b2_e
//
// with the choices and weights worked out here too (softmax, the k best,
// optionally divided by their sum) from the router's logits; then which
// assignment an expert keeps when its capacity is short (every first choice
// before any second one, then token order), and a capacity case whose kept
// and dropped assignments, and the one token left with nothing, are worked
// out by hand.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "experts/expert_mlps.hpp"
#include "experts/moe.hpp"
#include "experts/router.hpp"
#include "support/differences.hpp"

namespace distlab::experts {
namespace {

using test_support::largest_difference;

// One assignment a layer keeps: token t sends its row to `expert` with `weight`.
struct Kept {
  int64_t token, expert;
  double weight;
};

// Experts with every weight and bias drawn (the biases not zero, so that they count).
ExpertMlps drawn_experts(int64_t E, int64_t d, int64_t h, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  return ExpertMlps(at::randn({E, d, h}, g), at::randn({E, h}, g), at::randn({E, h, d}, g), at::randn({E, d}, g));
}

// expert_e(x_t) = relu(x_t W1_e + b1_e) W2_e + b2_e, element by element, in double.
std::vector<double> expert_by_hand(const ExpertMlpsImpl& experts, int64_t e, const at::Tensor& x, int64_t t) {
  const at::Tensor w1 = experts.w1.detach().to(at::kDouble), b1 = experts.b1.detach().to(at::kDouble);
  const at::Tensor w2 = experts.w2.detach().to(at::kDouble), b2 = experts.b2.detach().to(at::kDouble);
  const at::Tensor xd = x.detach().to(at::kDouble);
  const auto W1 = w1.accessor<double, 3>(), W2 = w2.accessor<double, 3>();
  const auto B1 = b1.accessor<double, 2>(), B2 = b2.accessor<double, 2>(), X = xd.accessor<double, 2>();
  const int64_t d = w1.size(1), h = w1.size(2);
  std::vector<double> hidden(static_cast<size_t>(h)), out(static_cast<size_t>(d));
  for (int64_t j = 0; j < h; ++j) {
    double sum = B1[e][j];
    for (int64_t i = 0; i < d; ++i) sum += X[t][i] * W1[e][i][j];
    hidden[static_cast<size_t>(j)] = std::max(sum, 0.0);
  }
  for (int64_t o = 0; o < d; ++o) {
    double sum = B2[e][o];
    for (int64_t j = 0; j < h; ++j) sum += hidden[static_cast<size_t>(j)] * W2[e][j][o];
    out[static_cast<size_t>(o)] = sum;
  }
  return out;
}

// y (T, d): each token's kept assignments' weight x expert output, summed;
// a token with none keeps a row of zeros.
at::Tensor layer_by_hand(const ExpertMlpsImpl& experts, const at::Tensor& x, const std::vector<Kept>& kept) {
  const int64_t T = x.size(0), d = x.size(1);
  std::vector<double> y(static_cast<size_t>(T * d), 0.0);
  for (const Kept& k : kept) {
    const std::vector<double> out = expert_by_hand(experts, k.expert, x, k.token);
    for (int64_t o = 0; o < d; ++o) y[static_cast<size_t>(k.token * d + o)] += k.weight * out[static_cast<size_t>(o)];
  }
  return at::tensor(y, at::kDouble).view({T, d});
}

// A routing written out: each token's experts, best first, and their weights.
Routing written_routing(const std::vector<std::vector<int64_t>>& experts, const std::vector<std::vector<double>>& w) {
  std::vector<int64_t> ids;
  std::vector<float> weights;
  for (size_t t = 0; t < experts.size(); ++t)
    for (size_t j = 0; j < experts[t].size(); ++j) ids.push_back(experts[t][j]), weights.push_back(float(w[t][j]));
  const int64_t T = static_cast<int64_t>(experts.size()), k = static_cast<int64_t>(experts[0].size());
  Routing r;
  r.experts = at::tensor(ids, at::kLong).view({T, k});
  r.weights = at::tensor(weights, at::kFloat).view({T, k});
  return r;
}

// 10 tokens, 4 experts, dropless, k = 1 and 2, the weights the chosen
// probabilities and those divided by their sum: the router's choices
// (softmax of the logits, the k largest, best first) made here in plain
// loops, then each token's output as the formula's sum.
TEST(MoeFormula, EachTokensOutputIsItsChosenExpertsWeightedSum) {
  const int64_t T = 10, E = 4, d = 6, h = 5;
  ExpertMlps experts = drawn_experts(E, d, h, 61);
  const at::Tensor x = at::randn({T, d}, at::detail::createCPUGenerator(62));
  const at::Tensor logits = at::randn({T, E}, at::detail::createCPUGenerator(63));
  const at::Tensor L = logits.to(at::kDouble);
  const auto l = L.accessor<double, 2>();
  for (int64_t k : {1, 2})
    for (bool normalize : {false, true}) {
      std::vector<Kept> chosen;
      for (int64_t t = 0; t < T; ++t) {
        double top = l[t][0], sum = 0;
        for (int64_t e = 1; e < E; ++e) top = std::max(top, l[t][e]);
        std::vector<double> p(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(l[t][e] - top);
        for (double& v : p) v /= sum;
        std::vector<Kept> mine;  // the k largest, best first
        std::vector<bool> taken(static_cast<size_t>(E), false);
        for (int64_t j = 0; j < k; ++j) {
          int64_t best = -1;
          for (int64_t e = 0; e < E; ++e)
            if (!taken[size_t(e)] && (best < 0 || p[size_t(e)] > p[size_t(best)])) best = e;
          taken[size_t(best)] = true;
          mine.push_back({t, best, p[size_t(best)]});
        }
        double kept_sum = 0;
        for (const Kept& c : mine) kept_sum += c.weight;
        for (Kept& c : mine) chosen.push_back({t, c.expert, normalize ? c.weight / kept_sum : c.weight});
      }
      MoeOptions o;
      o.experts = E, o.top_k = k, o.normalize = normalize;
      const at::Tensor y = moe_local(x, route(logits, k, normalize), *experts, o);
      const at::Tensor want = layer_by_hand(*experts, x, chosen);
      EXPECT_LE(largest_difference(y, want), 1e-5) << "k " << k << (normalize ? ", normalized" : "");
      EXPECT_TRUE(test_support::exceeds(want.abs().min().item<double>(), 0)) << "an output of 0 would not show a term left out";
    }
}

// 4 tokens, 2 experts, k = 2, capacity ceil(4 x 2 x 0.75 / 2) = 3. Expert 0
// is token 0's second choice and tokens 1, 2 and 3's first: the three
// first choices fill it, and token 0's second choice is dropped although
// token 0 comes first. Expert 1 then takes token 0's first choice and, of
// the second choices, tokens 1 and 2 in token order; token 3's is dropped.
// Token order alone (GShard's priority read the other way) would have kept
// token 0's second choice and dropped token 3's first.
TEST(MoeFormula, FirstChoicesWinAnExpertsCapacityBeforeEarlierTokensSecondChoices) {
  const int64_t E = 2, d = 6, h = 5;
  ExpertMlps experts = drawn_experts(E, d, h, 71);
  const at::Tensor x = at::randn({4, d}, at::detail::createCPUGenerator(72));
  const Routing r = written_routing({{1, 0}, {0, 1}, {0, 1}, {0, 1}},
                                    {{0.75, 0.25}, {0.625, 0.375}, {0.5625, 0.4375}, {0.875, 0.125}});
  MoeOptions o;
  o.experts = E, o.top_k = 2, o.capacity_factor = 0.75;
  MoeStats stats;
  const at::Tensor y = moe_local(x, r, *experts, o, &stats);
  EXPECT_EQ(stats.capacity, 3);
  EXPECT_EQ(stats.kept, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(stats.dropped, (std::vector<int64_t>{1, 1}));
  const std::vector<Kept> kept{{0, 1, 0.75}, {1, 0, 0.625}, {2, 0, 0.5625}, {3, 0, 0.875},  // first choices
                               {1, 1, 0.375}, {2, 1, 0.4375}};                                // 1's and 2's second
  EXPECT_LE(largest_difference(y, layer_by_hand(*experts, x, kept)), 1e-5);
  // Token order's outcome differs where it matters: tokens 0 and 3.
  const std::vector<Kept> by_token_order{{0, 1, 0.75}, {0, 0, 0.25}, {1, 0, 0.625}, {1, 1, 0.375},
                                         {2, 0, 0.5625}, {2, 1, 0.4375}};
  const at::Tensor other = layer_by_hand(*experts, x, by_token_order);
  for (int64_t t : {0, 3})
    EXPECT_TRUE(test_support::exceeds(largest_difference(y[t], other[t]), 1e-3)) << "token " << t;
}

// 6 tokens, 4 experts, k = 2, capacity ceil(6 x 2 x 0.5 / 4) = ceil(1.5) = 2.
//   token   0      1      2      3      4      5
//   first   0 kept 0 kept 0 drop 0 drop 1 kept 3 kept   expert 0 full after tokens 0, 1
//   second  1 kept 1 drop 1 drop 2 kept 0 drop 0 drop   expert 1 full after tokens 4, 0
// Kept 2, 2, 1, 1; dropped 4, 2, 0, 0: 6 of the 12 assignments. Token 2
// lost both its choices: exactly one token comes out as zeros.
TEST(MoeFormula, ACapacityDropsTheAssignmentsWorkedOutByHand) {
  const int64_t E = 4, d = 6, h = 5, T = 6;
  ExpertMlps experts = drawn_experts(E, d, h, 81);
  const at::Tensor x = at::randn({T, d}, at::detail::createCPUGenerator(82));
  const std::vector<std::vector<double>> w{{0.5, 0.25}, {0.625, 0.125}, {0.75, 0.0625},
                                           {0.375, 0.3125}, {0.8125, 0.1875}, {0.6875, 0.25}};
  const Routing r = written_routing({{0, 1}, {0, 1}, {0, 1}, {0, 2}, {1, 0}, {3, 0}}, w);
  MoeOptions o;
  o.experts = E, o.top_k = 2, o.capacity_factor = 0.5;
  MoeStats stats;
  const at::Tensor y = moe_local(x, r, *experts, o, &stats);
  EXPECT_EQ(stats.capacity, 2);
  EXPECT_EQ(stats.kept, (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(stats.dropped, (std::vector<int64_t>{4, 2, 0, 0}));
  const std::vector<Kept> kept{{0, 0, w[0][0]}, {1, 0, w[1][0]}, {4, 1, w[4][0]},
                               {5, 3, w[5][0]}, {0, 1, w[0][1]}, {3, 2, w[3][1]}};
  EXPECT_LE(largest_difference(y, layer_by_hand(*experts, x, kept)), 1e-5);
  int64_t zero_rows = 0;
  for (int64_t t = 0; t < T; ++t) zero_rows += at::equal(y[t], at::zeros({d})) ? 1 : 0;
  EXPECT_EQ(zero_rows, 1) << "tokens whose every choice was dropped";
  EXPECT_TRUE(at::equal(y[2], at::zeros({d}))) << "token 2 lost both its choices";
}

}  // namespace
}  // namespace distlab::experts
