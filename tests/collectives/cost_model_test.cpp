// The alpha-beta model: the slides' story exactly, and every algorithm's
// prediction equal to the closed form the textbooks give.
#include "collectives/cost_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace distlab::collectives {
namespace {

// "Send a 5 MB file to 7 friends at 1 MB/s."
constexpr int64_t kFileBytes = 5'000'000;
constexpr LinkParams kOneMegabytePerSecond{/*alpha_s=*/0.0, /*beta_s_per_byte=*/1e-6};
constexpr double kTolerance = 1e-9;

TEST(CostModel, SlidesSequentialBroadcastToSevenFriendsTakes35Seconds) {
  const Plan plan = make_plan(Collective::kBroadcast, Algorithm::kSequential, 8, kFileBytes, 0, /*elem_bytes=*/1);
  const Prediction prediction = predict(plan, kOneMegabytePerSecond);
  ASSERT_EQ(prediction.step_seconds.size(), 7u);
  for (double s : prediction.step_seconds) EXPECT_NEAR(s, 5.0, kTolerance);
  EXPECT_NEAR(prediction.total_seconds, 35.0, kTolerance);
  EXPECT_EQ(prediction.max_bytes_sent_per_rank, 7 * kFileBytes);
}

TEST(CostModel, SlidesSendingToAllSevenAtOnceStillTakes35Seconds) {
  Step at_once;
  for (int friend_rank = 1; friend_rank < 8; ++friend_rank)
    at_once.transfers.push_back(Transfer{0, friend_rank, -1, 1, {0, kFileBytes}, false});
  EXPECT_NEAR(predict_step(at_once, 8, 1, kOneMegabytePerSecond), 35.0, kTolerance);
}

TEST(CostModel, SlidesTreeBroadcastWithEightRanksTakes15Seconds) {
  const Plan plan = make_plan(Collective::kBroadcast, Algorithm::kTree, 8, kFileBytes, 0, 1);
  const Prediction prediction = predict(plan, kOneMegabytePerSecond);
  ASSERT_EQ(prediction.step_seconds.size(), 3u);
  EXPECT_NEAR(prediction.step_seconds[0], 5.0, kTolerance);
  EXPECT_NEAR(prediction.step_seconds[1], 5.0, kTolerance);  // 2 ranks hold the file after 5 s
  EXPECT_NEAR(prediction.step_seconds[2], 5.0, kTolerance);  // 4 after 10 s, all 8 after 15 s
  EXPECT_NEAR(prediction.total_seconds, 15.0, kTolerance);
}

TEST(CostModel, TreeReduceWithEightRanksTakesThreeSteps) {
  const Plan plan = make_plan(Collective::kReduce, Algorithm::kTree, 8, kFileBytes, 0, 1);
  EXPECT_NEAR(predict(plan, kOneMegabytePerSecond).total_seconds, 15.0, kTolerance);
}

// Closed forms, n bytes, p ranks, q = largest power of two <= p:
//   sequential broadcast/reduce   (p-1)(a + n b)
//   tree broadcast/reduce         ceil(log2 p)(a + n b)
//   reduce + broadcast            2 ceil(log2 p)(a + n b)
//   ring all-reduce               2(p-1)(a + n/p b)
//   ring reduce-scatter/gather    (p-1)(a + n/p b)
//   halving-doubling              [p>q] 2(a + n b) + 2 log2 q a + 2 (q-1)/q n b
TEST(CostModel, EveryAlgorithmMatchesItsClosedForm) {
  const LinkParams link{/*alpha_s=*/3e-5, /*beta_s_per_byte=*/2e-10};
  const double a = link.alpha_s, b = link.beta_s_per_byte;
  for (int p = 2; p <= 33; ++p) {
    int q = 1, log2q = 0, ceil_log2p = 0;
    while (q * 2 <= p) q *= 2, ++log2q;
    while ((1 << ceil_log2p) < p) ++ceil_log2p;
    const int64_t count = int64_t{p} * q * 1000;  // p and q divide it: no rounding
    const double n = 4.0 * count;
    auto total = [&](Collective c, Algorithm algo) {
      return predict(make_plan(c, algo, p, count), link).total_seconds;
    };
    const double rel = 1e-12;
    const double seq = (p - 1) * (a + n * b), tree = ceil_log2p * (a + n * b);
    EXPECT_NEAR(total(Collective::kBroadcast, Algorithm::kSequential), seq, seq * rel) << p;
    EXPECT_NEAR(total(Collective::kReduce, Algorithm::kSequential), seq, seq * rel) << p;
    EXPECT_NEAR(total(Collective::kBroadcast, Algorithm::kTree), tree, tree * rel) << p;
    EXPECT_NEAR(total(Collective::kReduce, Algorithm::kTree), tree, tree * rel) << p;
    EXPECT_NEAR(total(Collective::kAllReduce, Algorithm::kReduceBroadcast), 2 * tree, tree * rel) << p;
    const double ring = 2 * (p - 1) * (a + n / p * b);
    EXPECT_NEAR(total(Collective::kAllReduce, Algorithm::kRing), ring, ring * rel) << p;
    EXPECT_NEAR(total(Collective::kReduceScatter, Algorithm::kRing), ring / 2, ring * rel) << p;
    EXPECT_NEAR(total(Collective::kAllGather, Algorithm::kRing), ring / 2, ring * rel) << p;
    const double hd = (p > q ? 2 * (a + n * b) : 0.0) + 2 * log2q * a + 2.0 * (q - 1) / q * n * b;
    EXPECT_NEAR(total(Collective::kAllReduce, Algorithm::kHalvingDoubling), hd, hd * rel) << p;
    // Pairwise all-to-all: p - 1 messages of n / p each, one per step.
    EXPECT_NEAR(total(Collective::kAllToAll, Algorithm::kPairwise), ring / 2, ring * rel) << p;
  }
}

TEST(CostModel, LatencyBoundSmallMessagesFavourFewSteps) {
  // 8 bytes, 10 us per message, 10 GB/s: the ring's 2(p-1) latencies lose
  // to halving-doubling's 2 log2 p.
  const LinkParams link{1e-5, 1e-10};
  const int p = 16;
  const double ring = predict(make_plan(Collective::kAllReduce, Algorithm::kRing, p, 2), link).total_seconds;
  const double hd = predict(make_plan(Collective::kAllReduce, Algorithm::kHalvingDoubling, p, 2), link).total_seconds;
  // Only 2 of the 16 one-element chunks are non-empty, but every step moves one.
  EXPECT_NEAR(ring, 2 * 15 * (1e-5 + 4 * 1e-10), 1e-12);
  EXPECT_LT(hd, ring);
}

TEST(CostModel, BusBandwidthFactorsAreTheNcclTestsOnes) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduce, 3), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 1), 0.0);
}

}  // namespace
}  // namespace distlab::collectives
