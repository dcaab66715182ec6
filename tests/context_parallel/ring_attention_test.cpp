// Ring attention (context_parallel/ring_attention.hpp), K/V gathered once
// and the naive gather-everything version (gathered_attention.hpp) on 1-4
// thread ranks, contiguous and zigzag, causal and not, against PyTorch's
// softmax over the whole sequence at each rank's positions; the causal work per rank, which
// the contiguous layout leaves uneven and zigzag evens out; layouts that do
// not split refused with the lengths that would.
#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include <numeric>
#include <string>
#include <vector>

#include "comm/threads_backend.hpp"
#include "context_checks.hpp"
#include "context_parallel/ring_attention.hpp"
#include "support/differences.hpp"

namespace distlab::context_parallel {
namespace {

using testing::kLength;
using testing::seeded;

using testing::Method;

struct Case {
  int ranks;
  Layout layout;
  bool causal;
  Method method;
};

std::string name_of(const Case& c) {
  return std::to_string(c.ranks) + "_ranks_" + to_string(c.layout) + (c.causal ? "_causal_" : "_full_") +
         testing::to_string(c.method);
}

class ContextAttention : public ::testing::TestWithParam<Case> {};

TEST_P(ContextAttention, EachRankGetsTheWholeSoftmaxAtItsPositions) {
  const Case c = GetParam();
  comm::run_thread_ranks(c.ranks, [&](comm::Communicator& comm) {
    EXPECT_LE(testing::largest_difference_from_whole(comm, c.layout, c.causal, c.method), testing::kTolerance)
        << comm.self();
  });
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
      for (bool causal : {false, true})
        for (Method method : {Method::kRing, Method::kAllGather, Method::kNaive})
          out.push_back({ranks, layout, causal, method});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ContextAttention, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

// The backward ring against autograd on the whole sequence: the loss
// sum(out * G), its gradients for q, k and v at each rank's positions.
class RingBackward : public ::testing::TestWithParam<Case> {};

TEST_P(RingBackward, GradientsEqualAutogradOnTheWholeSequence) {
  const Case c = GetParam();
  const at::Tensor q = seeded({1, 2, kLength, 8}, 21).requires_grad_(true);
  const at::Tensor k = seeded({1, 2, kLength, 8}, 22).requires_grad_(true);
  const at::Tensor v = seeded({1, 2, kLength, 8}, 23).requires_grad_(true);
  const at::Tensor G = seeded({1, 2, kLength, 8}, 24);
  (at::matmul(at::softmax(testing::whole_scores(q, k, 0.35, c.causal), -1), v) * G).sum().backward();
  comm::run_thread_ranks(c.ranks, [&](comm::Communicator& comm) {
    const at::Tensor mine = positions_of(c.layout, kLength, comm.size(), comm.rank());
    const at::Tensor qm = q.detach().index_select(-2, mine), km = k.detach().index_select(-2, mine);
    const at::Tensor vm = v.detach().index_select(-2, mine);
    const BlockResult forward = ring_attention(comm, qm, km, vm, 0.35, mine, c.causal, /*tag=*/3);
    const RingGradients g = ring_attention_backward(comm, qm, km, vm, 0.35, mine, c.causal, forward,
                                                    G.index_select(-2, mine), /*tag=*/10);
    EXPECT_LE(test_support::largest_difference(g.dq, q.grad().index_select(-2, mine)), 1e-5) << comm.self();
    EXPECT_LE(test_support::largest_difference(g.dk, k.grad().index_select(-2, mine)), 1e-5) << comm.self();
    EXPECT_LE(test_support::largest_difference(g.dv, v.grad().index_select(-2, mine)), 1e-5) << comm.self();
  });
}

std::vector<Case> ring_cases() {
  std::vector<Case> out;
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
      for (bool causal : {false, true}) out.push_back({ranks, layout, causal, Method::kRing});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingBackward, ::testing::ValuesIn(ring_cases()),
                         [](const auto& info) { return name_of(info.param); });

// The causal pairs each rank computes over the ring: S(S+1)/2 in all either
// way; the contiguous layout gives the last rank the most (it sees every
// earlier token), zigzag gives every rank the same.
TEST(RingAttentionWork, ZigzagEvensOutWhatContiguousLeavesUneven) {
  const int C = 4;
  for (Layout layout : {Layout::kContiguous, Layout::kZigzag}) {
    std::vector<int64_t> total(C);
    std::vector<RingWork> work(C);
    const at::Tensor x = seeded({1, 1, kLength, 4}, 4);
    comm::run_thread_ranks(C, [&](comm::Communicator& comm) {
      const at::Tensor mine = positions_of(layout, kLength, C, comm.rank());
      const at::Tensor xs = x.index_select(-2, mine);
      RingWork& w = work[static_cast<size_t>(comm.rank())];
      ring_attention(comm, xs, xs, xs, 1.0, mine, /*causal=*/true, 0, &w);
    });
    for (int r = 0; r < C; ++r) {
      ASSERT_EQ(work[r].computed.size(), static_cast<size_t>(C));
      total[r] = std::accumulate(work[r].computed.begin(), work[r].computed.end(), int64_t{0});
      for (int s = 0; s < C; ++s) EXPECT_EQ(work[r].pairs[s], (kLength / C) * (kLength / C));
    }
    EXPECT_EQ(std::accumulate(total.begin(), total.end(), int64_t{0}), kLength * (kLength + 1) / 2);
    if (layout == Layout::kContiguous) {
      // Rank r's queries r*6+1 .. r*6+6 see that many keys each.
      for (int r = 0; r < C; ++r) EXPECT_EQ(total[r], 36 * r + 21) << "rank " << r;
    } else {
      for (int r = 0; r < C; ++r) EXPECT_EQ(total[r], total[0]) << "rank " << r;
    }
  }
}

std::vector<int64_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(RingAttentionLayouts, LengthsThatDoNotSplitAreRefused) {
  EXPECT_EQ(values(positions_of(Layout::kZigzag, 8, 2, 0)), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(values(positions_of(Layout::kZigzag, 8, 2, 1)), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(values(positions_of(Layout::kContiguous, 8, 2, 1)), (std::vector<int64_t>{4, 5, 6, 7}));
  try {
    positions_of(Layout::kZigzag, 12, 4, 0);
    FAIL() << "12 tokens cut in 8 zigzag chunks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("does not split into 8 equal chunks (2C for C ranks); choose a length that "
                                         "is a multiple of 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(positions_of(Layout::kContiguous, 10, 4, 0), std::invalid_argument);
}

}  // namespace
}  // namespace distlab::context_parallel
