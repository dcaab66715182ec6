// Ring attention (context_parallel/ring_attention.hpp) on 1-4 thread ranks,
// contiguous and zigzag, causal and not, against PyTorch's softmax over the
// whole sequence at each rank's positions; the causal work per rank, which
// the contiguous layout leaves uneven and zigzag evens out; layouts that do
// not split refused with the lengths that would.
#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "comm/threads_backend.hpp"
#include "context_parallel/ring_attention.hpp"
#include "support/differences.hpp"

namespace distlab::context_parallel {
namespace {

using test_support::largest_difference;

constexpr int64_t kLength = 24;  // splits into 2C chunks for C = 1, 2, 3, 4
constexpr double kScale = 0.35;

at::Tensor seeded(at::IntArrayRef shape, uint64_t seed) { return at::randn(shape, at::detail::createCPUGenerator(seed)); }

struct Case {
  int ranks;
  Layout layout;
  bool causal;
};

std::string name_of(const Case& c) {
  return std::to_string(c.ranks) + "_ranks_" + to_string(c.layout) + (c.causal ? "_causal" : "_full");
}

class RingAttention : public testing::TestWithParam<Case> {};

TEST_P(RingAttention, EachRankGetsTheWholeSoftmaxAtItsPositions) {
  const Case c = GetParam();
  // The whole sequence, the same on every rank; each keeps its own tokens.
  const at::Tensor q = seeded({1, 2, kLength, 8}, 1), k = seeded({1, 2, kLength, 8}, 2), v = seeded({1, 2, kLength, 8}, 3);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * kScale;
  if (c.causal) {
    const at::Tensor all = at::arange(kLength, at::kLong);
    scores = scores.masked_fill(all.unsqueeze(0) > all.unsqueeze(1), -std::numeric_limits<float>::infinity());
  }
  const at::Tensor whole_out = at::matmul(at::softmax(scores, -1), v), whole_lse = at::logsumexp(scores, -1);
  comm::run_thread_ranks(c.ranks, [&](comm::Communicator& comm) {
    const at::Tensor mine = positions_of(c.layout, kLength, comm.size(), comm.rank());
    const BlockResult got = ring_attention(comm, q.index_select(-2, mine), k.index_select(-2, mine),
                                           v.index_select(-2, mine), kScale, mine, c.causal, /*tag=*/7);
    EXPECT_LE(largest_difference(got.out, whole_out.index_select(-2, mine)), 2e-6) << comm.self();
    EXPECT_LE(largest_difference(got.lse, whole_lse.index_select(-1, mine)), 2e-6) << comm.self();
  });
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
      for (bool causal : {false, true}) out.push_back({ranks, layout, causal});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttention, testing::ValuesIn(cases()),
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
