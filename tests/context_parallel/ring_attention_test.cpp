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
#include "context_parallel/ulysses.hpp"
#include "support/differences.hpp"

namespace distlab::context_parallel {
namespace {

using testing::kLength;
using testing::seeded;

struct Case {
  int ranks;
  Layout layout;
  bool causal;
  Method method;
};

std::string name_of(const Case& c) {
  return std::to_string(c.ranks) + "_ranks_" + to_string(c.layout) + (c.causal ? "_causal_" : "_full_") +
         (c.method == Method::kAllGather ? "all_gather" : to_string(c.method));
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
        for (Method method : all_methods())
          out.push_back({ranks, layout, causal, method});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ContextAttention, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

// The backward against autograd on the whole sequence: the loss
// sum(out * G), its gradients for q, k and v at each rank's positions; the
// ring's own backward, and autograd through Ulysses' exchanges.
class ContextBackward : public ::testing::TestWithParam<Case> {};

TEST_P(ContextBackward, GradientsEqualAutogradOnTheWholeSequence) {
  const Case c = GetParam();
  comm::run_thread_ranks(c.ranks, [&](comm::Communicator& comm) {
    EXPECT_LE(testing::largest_gradient_difference(comm, c.layout, c.causal, c.method), testing::kGradientTolerance)
        << comm.self();
  });
}

std::vector<Case> backward_cases() {
  std::vector<Case> out;
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
      for (bool causal : {false, true})
        for (Method method : all_methods()) out.push_back({ranks, layout, causal, method});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ContextBackward, ::testing::ValuesIn(backward_cases()),
                         [](const auto& info) { return name_of(info.param); });

// The causal pairs each rank computes over the ring, step by step as the
// ring plan (ring_plan.hpp) says: S(S+1)/2 in all either way; the contiguous layout gives the last rank the most (it sees every
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
    const RingPlan plan = make_ring_plan(layout, C, kLength, /*causal=*/true);
    for (int r = 0; r < C; ++r) {
      ASSERT_EQ(work[r].computed.size(), static_cast<size_t>(C));
      for (int s = 0; s < C; ++s)
        EXPECT_EQ(work[r].computed[s], plan.pairs(r, s)) << to_string(layout) << " rank " << r << " step " << s;

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

// The ring's time and its efficiency, worked by hand for lesson 15's
// sequence of 64 on 4 ranks. Contiguous, chunks of 16: step 0 is every
// rank's diagonal (16 x 17 / 2 = 136 pairs), steps 1-3 a full block
// (256) on the busiest rank: 136 + 3 x 256 = 904, against 64 x 65 / 2 / 4
// = 520 spread evenly, 57.5 % (C/(2C-1) = 4/7 as the chunks grow). Zigzag,
// chunks of 8: 136 then 128 on every rank, 520: even.
TEST(RingAttentionWork, TheRingWaitsForItsBusiestRankAtEveryStep) {
  const RingPlan contiguous = make_ring_plan(Layout::kContiguous, 4, 64, /*causal=*/true);
  EXPECT_EQ(contiguous.ring_time(), 904);
  EXPECT_EQ(contiguous.balanced_time(), 520.0);
  const RingPlan zigzag = make_ring_plan(Layout::kZigzag, 4, 64, /*causal=*/true);
  EXPECT_EQ(zigzag.ring_time(), 520);
  EXPECT_EQ(zigzag.balanced_time(), 520.0);
  // Long chunks: the efficiency tends to C / (2C - 1).
  const RingPlan long_chunks = make_ring_plan(Layout::kContiguous, 4, 4 * 4096, /*causal=*/true);
  EXPECT_NEAR(long_chunks.balanced_time() / static_cast<double>(long_chunks.ring_time()), 4.0 / 7.0, 1e-3);
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

// Ulysses gives each rank whole heads: 2 heads on 3 ranks are refused,
// naming both and what takes any number of heads.
TEST(Ulysses, HeadsThatDoNotDivideAreRefused) {
  comm::run_thread_ranks(3, [&](comm::Communicator& comm) {
    const at::Tensor x = seeded({2, 4, 8}, 5);
    try {
      to_heads(comm, x);
      ADD_FAILURE() << "2 heads split over 3 ranks";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("2 heads do not divide by 3 (ring or all-gather attention take any number "
                                           "of heads)"),
                std::string::npos)
          << e.what();
    }
  });
}

// to_heads then to_sequence gives back what went in, on every rank.
TEST(Ulysses, TheTwoExchangesAreInverses) {
  for (int C : {1, 2, 3, 4})
    comm::run_thread_ranks(C, [&](comm::Communicator& comm) {
      const at::Tensor x = seeded({2, 12, 6, 5}, 40 + comm.rank());
      const at::Tensor heads = to_heads(comm, x);
      EXPECT_EQ(heads.sizes(), (at::IntArrayRef{2, 12 / C, 6 * C, 5}));
      EXPECT_TRUE(at::equal(to_sequence(comm, heads), x)) << comm.self();
    });
}

}  // namespace
}  // namespace distlab::context_parallel
