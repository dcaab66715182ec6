// Every plan, replayed on paper, delivers the right data to every rank, for
// world sizes 1..17, counts from 0 to more than p, every root; and the step
// counts and bytes per rank are the ones the textbooks give.
#include "collectives/plan.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "replay.hpp"

namespace distlab::collectives {
namespace {

constexpr Collective kAllCollectives[] = {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce,
                                          Collective::kReduceScatter, Collective::kAllGather};

bool is_rooted(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }

std::vector<int64_t> counts_for(int p) {
  std::set<int64_t> counts = {0, 1, 2, 3, 5, 100, 257};
  for (int64_t c : {p - 1, p, p + 1, 2 * p + 3, 3 * p}) counts.insert(std::max<int64_t>(c, 0));
  return {counts.begin(), counts.end()};
}

int ceil_log2(int p) {
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  return steps;
}

TEST(ChunkRange, CoversTheBufferInOrderWithSizesWithinOne) {
  for (int parts = 1; parts <= 17; ++parts)
    for (int64_t count : {0, 1, 2, 16, 17, 18, 100003}) {
      int64_t next = 0, smallest = count, largest = 0;
      for (int c = 0; c < parts; ++c) {
        const Range r = chunk_range(count, parts, c);
        EXPECT_EQ(r.offset, next) << "parts " << parts << " count " << count << " chunk " << c;
        next += r.count;
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(largest - smallest, 1);
    }
}

// Replays one plan; "" when every rank ends with the right data.
std::string replay_fault(Collective collective, Algorithm algorithm, int p, int64_t count, int root) {
  const Plan plan = make_plan(collective, algorithm, p, count, root);
  auto buffers = testing::initial_buffers(plan);
  const std::string fault = testing::replay(plan, buffers);
  return fault.empty() ? testing::compare_results(plan, buffers, testing::expected_buffers(plan)) : fault;
}

TEST(PlanReplay, EveryAlgorithmDeliversTheRightDataToEveryRank) {
  int replayed = 0;
  for (int p = 1; p <= 17; ++p)
    for (Collective collective : kAllCollectives)
      for (Algorithm algorithm : algorithms_for(collective))
        for (int64_t count : counts_for(p))
          for (int root = 0; root < (is_rooted(collective) ? p : 1); ++root) {
            ASSERT_EQ(replay_fault(collective, algorithm, p, count, root), "");
            ++replayed;
          }
  EXPECT_GT(replayed, 1000);
}

TEST(PlanReplay, LargeWorldSizesUpTo64) {
  for (int p : {31, 32, 33, 48, 63, 64})
    for (Collective collective : kAllCollectives)
      for (Algorithm algorithm : algorithms_for(collective))
        for (int64_t count : {int64_t{1}, int64_t{p} - 1, int64_t{p} + 1, int64_t{200}})
          for (int root : {0, p / 2, p - 1}) {
            ASSERT_EQ(replay_fault(collective, algorithm, p, count, root), "");
            if (!is_rooted(collective)) break;
          }
}

// The replay must be able to fail: a plan with one transfer dropped, or one
// transfer sent twice, does not deliver.
TEST(PlanReplay, CatchesABrokenPlan) {
  for (Algorithm algorithm : algorithms_for(Collective::kAllReduce)) {
    Plan plan = make_plan(Collective::kAllReduce, algorithm, 6, 50);
    Plan dropped = plan;
    dropped.steps[1].transfers.pop_back();
    auto buffers = testing::initial_buffers(dropped);
    EXPECT_EQ(testing::replay(dropped, buffers), "");
    EXPECT_NE(testing::compare_results(dropped, buffers, testing::expected_buffers(dropped)), "")
        << to_string(algorithm);

    Plan doubled = plan;
    doubled.steps.push_back(doubled.steps.front());
    buffers = testing::initial_buffers(doubled);
    testing::replay(doubled, buffers);
    EXPECT_NE(testing::compare_results(doubled, buffers, testing::expected_buffers(doubled)), "")
        << to_string(algorithm);
  }
}

TEST(PlanReplay, ResultRangeAgreesWithTheReplaysDefinition) {
  for (int p : {1, 3, 8})
    for (Collective collective : kAllCollectives)
      for (int root = 0; root < p; ++root) {
        const Plan plan = make_plan(collective, algorithms_for(collective).front(), p, 3 * p + 1, root);
        for (int r = 0; r < p; ++r) {
          const Range range = result_range(plan, r);
          for (int64_t i = 0; i < plan.count; ++i)
            EXPECT_EQ(i >= range.offset && i < range.offset + range.count, testing::in_result(plan, r, i))
                << to_string(collective) << " p=" << p << " rank " << r << " element " << i;
        }
      }
}

TEST(PlanShape, TreeBroadcastAndReduceTakeCeilLog2PSteps) {
  for (int p = 1; p <= 64; ++p)
    for (int root : {0, p / 2, p - 1}) {
      EXPECT_EQ(make_plan(Collective::kBroadcast, Algorithm::kTree, p, 10, root).steps.size(), ceil_log2(p)) << p;
      EXPECT_EQ(make_plan(Collective::kReduce, Algorithm::kTree, p, 10, root).steps.size(), ceil_log2(p)) << p;
      EXPECT_EQ(make_plan(Collective::kBroadcast, Algorithm::kSequential, p, 10, root).steps.size(), p - 1) << p;
      EXPECT_EQ(make_plan(Collective::kReduce, Algorithm::kSequential, p, 10, root).steps.size(), p - 1) << p;
    }
}

TEST(PlanShape, AllReduceStepCounts) {
  for (int p = 1; p <= 64; ++p) {
    int q = 1;
    while (q * 2 <= p) q *= 2;
    const int64_t count = 4 * p;  // every chunk non-empty
    EXPECT_EQ(make_plan(Collective::kAllReduce, Algorithm::kRing, p, count).steps.size(), 2 * (p - 1)) << p;
    EXPECT_EQ(make_plan(Collective::kAllReduce, Algorithm::kReduceBroadcast, p, count).steps.size(), 2 * ceil_log2(p))
        << p;
    EXPECT_EQ(make_plan(Collective::kAllReduce, Algorithm::kHalvingDoubling, p, count).steps.size(),
              2 * ceil_log2(q) + (p == q ? 0 : 2))
        << p;
    EXPECT_EQ(make_plan(Collective::kReduceScatter, Algorithm::kRing, p, count).steps.size(), p - 1) << p;
    EXPECT_EQ(make_plan(Collective::kAllGather, Algorithm::kRing, p, count).steps.size(), p - 1) << p;
  }
}

TEST(PlanShape, CountZeroHasNoSteps) {
  for (Collective collective : kAllCollectives)
    for (Algorithm algorithm : algorithms_for(collective))
      EXPECT_TRUE(make_plan(collective, algorithm, 5, 0, 1).steps.empty()) << to_string(algorithm);
}

// Ring all-reduce: each rank sends 2(p-1) chunks, 2(p-1)/p of the buffer.
// Exactly that when p divides the count; otherwise between 2(p-1) smallest
// and 2(p-1) largest chunks, and all ranks together send 2(p-1) buffers.
TEST(PlanBytes, RingAllReduceSendsTwoPMinusOneOverPOfTheBufferPerRank) {
  const int elem_bytes = 4;
  for (int p = 1; p <= 17; ++p)
    for (int64_t count : {int64_t{0}, int64_t{7}, int64_t{1000}, int64_t{1001}, int64_t{p} * 100, int64_t{100003}}) {
      const Plan plan = make_plan(Collective::kAllReduce, Algorithm::kRing, p, count, 0, elem_bytes);
      int64_t total = 0;
      for (int r = 0; r < p; ++r) {
        const int64_t sent = plan.bytes_sent_by(r);
        total += sent;
        EXPECT_EQ(sent, plan.bytes_received_by((r + 1) % p));
        if (count % p == 0) {
          EXPECT_EQ(sent * p, 2 * (p - 1) * count * elem_bytes) << "p " << p << " count " << count;
        } else {
          EXPECT_GE(sent, 2 * (p - 1) * (count / p) * elem_bytes);
          EXPECT_LE(sent, 2 * (p - 1) * (count / p + 1) * elem_bytes);
        }
      }
      EXPECT_EQ(total, 2 * (p - 1) * count * elem_bytes) << "p " << p << " count " << count;
    }
}

TEST(PlanBytes, HalvingDoublingMatchesTheRingForPowersOfTwo) {
  for (int p : {1, 2, 4, 8, 16, 32, 64}) {
    const int64_t count = 3 * 64;
    const Plan plan = make_plan(Collective::kAllReduce, Algorithm::kHalvingDoubling, p, count, 0, 2);
    for (int r = 0; r < p; ++r) EXPECT_EQ(plan.bytes_sent_by(r) * p, 2 * (p - 1) * count * 2) << p;
  }
}

TEST(PlanBytes, SequentialBroadcastRootSendsTheBufferToEachRank) {
  for (int p = 1; p <= 9; ++p) {
    const Plan plan = make_plan(Collective::kBroadcast, Algorithm::kSequential, p, 1000, p - 1, 8);
    EXPECT_EQ(plan.bytes_sent_by(p - 1), (p - 1) * 1000 * 8);
    for (int r = 0; r + 1 < p; ++r) EXPECT_EQ(plan.bytes_received_by(r), 1000 * 8);
  }
}

// One port per rank: in the tree, ring and halving-doubling plans no rank
// sends or receives more than one message in a step, so no step waits on a
// shared link (the sequential plans are sequential for the same reason).
TEST(PlanShape, NoRankSendsOrReceivesTwiceInAStep) {
  for (int p = 1; p <= 17; ++p)
    for (Collective collective : kAllCollectives)
      for (Algorithm algorithm : algorithms_for(collective)) {
        const Plan plan = make_plan(collective, algorithm, p, 1000, p / 3);
        for (const Step& step : plan.steps) {
          std::multiset<int> senders, receivers;
          for (const Transfer& t : step.transfers) {
            senders.insert(t.src);
            receivers.insert(t.dst);
          }
          for (int r = 0; r < p; ++r) {
            EXPECT_LE(senders.count(r), 1u) << to_string(algorithm) << " p=" << p;
            EXPECT_LE(receivers.count(r), 1u) << to_string(algorithm) << " p=" << p;
          }
        }
      }
}

TEST(PlanErrors, BadArgumentsAreNamed) {
  auto message_of = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_NE(message_of([] { make_plan(Collective::kAllReduce, Algorithm::kRing, 0, 10); }).find("world size 0"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kAllReduce, Algorithm::kRing, 1025, 10); }).find("1025"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kAllReduce, Algorithm::kRing, 4, -3); }).find("-3"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kBroadcast, Algorithm::kTree, 4, 10, 4); }).find("root 4"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kReduceScatter, Algorithm::kTree, 4, 10); }).find("ring"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kAllReduce, Algorithm::kNative, 4, 10); }).find("native"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kAllReduce, Algorithm::kRing, 4, 10, 0, 0); }).find("size 0"),
            std::string::npos);
}

TEST(PlanNames, RoundTripAndHelpfulErrors) {
  for (Collective c : kAllCollectives) EXPECT_EQ(parse_collective(to_string(c)), c);
  for (Algorithm a : {Algorithm::kSequential, Algorithm::kTree, Algorithm::kReduceBroadcast, Algorithm::kRing,
                      Algorithm::kHalvingDoubling, Algorithm::kPairwise, Algorithm::kNative})
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  EXPECT_EQ(parse_collective("all-reduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_algorithm("halving-doubling"), Algorithm::kHalvingDoubling);
  try {
    parse_algorithm("butterfly");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("butterfly"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("halving_doubling"), std::string::npos);
  }
  EXPECT_THROW(parse_collective("gather"), std::invalid_argument);
  EXPECT_EQ(parse_collective("all-to-all"), Collective::kAllToAll);
}

TEST(PlanText, OneLinePerStepNamingEveryTransfer) {
  // Tree broadcast from root 1 on 4 ranks: 1->2, then 1->3 and 2->0.
  EXPECT_EQ(to_text(make_plan(Collective::kBroadcast, Algorithm::kTree, 4, 10, 1)),
            "broadcast/tree: 4 ranks, root 1, 10 elements of 4 bytes, 2 steps\n"
            "step 0 (broadcast): 1->2 all 40 B\n"
            "step 1 (broadcast): 1->3 all 40 B, 2->0 all 40 B\n");
  // Ring reduce-scatter of 5 elements on 2 ranks: chunk 0 has 3, chunk 1 has 2.
  EXPECT_EQ(to_text(make_plan(Collective::kReduceScatter, Algorithm::kRing, 2, 5, 0, 8)),
            "reduce_scatter/ring: 2 ranks, 5 elements of 8 bytes, 1 step\n"
            "step 0 (reduce-scatter): 0->1 chunk 1 16 B added, 1->0 chunk 0 24 B added\n");
  // Halving-doubling on 4 ranks moves blocks of two chunks first.
  const std::string hd = to_text(make_plan(Collective::kAllReduce, Algorithm::kHalvingDoubling, 4, 8));
  EXPECT_NE(hd.find("step 0 (reduce-scatter): 0->2 chunks 2-3 16 B added, 1->3 chunks 2-3 16 B added, "
                    "2->0 chunks 0-1 16 B added"),
            std::string::npos)
      << hd;
}

// All-to-all replayed on paper: every rank's input block for d, tagged
// (sender, receiver, element), must land in d's output block for the
// sender, whatever the counts (zeros included); each step every rank
// sends at most once and receives at most once; no rank sends to itself.
struct Tagged {
  int src = -1, dst = -1;
  int64_t element = -1;
  bool operator==(const Tagged& o) const { return src == o.src && dst == o.dst && element == o.element; }
};

void replay_all_to_all(const Plan& plan) {
  const int p = plan.world_size;
  std::vector<std::vector<Tagged>> in(p), out(p);
  for (int r = 0; r < p; ++r) {
    in[r].resize(plan.input_count(r));
    out[r].resize(plan.output_count(r));
    for (int d = 0; d < p; ++d) {
      const Range b = plan.input_block(r, d);
      for (int64_t i = 0; i < b.count; ++i) in[r][b.offset + i] = {r, d, i};
    }
    const Range own_in = plan.input_block(r, r), own_out = plan.output_block(r, r);
    for (int64_t i = 0; i < own_in.count; ++i) out[r][own_out.offset + i] = in[r][own_in.offset + i];
  }
  for (const Step& step : plan.steps) {
    std::vector<int> sends(p), recvs(p);
    for (const Transfer& t : step.transfers) {
      ASSERT_NE(t.src, t.dst);
      ASSERT_GT(t.range.count, 0) << "empty transfers are left out";
      ++sends[t.src];
      ++recvs[t.dst];
      for (int64_t i = 0; i < t.range.count; ++i) out[t.dst][t.landing().offset + i] = in[t.src][t.range.offset + i];
    }
    for (int r = 0; r < p; ++r) EXPECT_LE(std::max(sends[r], recvs[r]), 1) << "rank " << r << " in " << step.phase;
  }
  for (int r = 0; r < p; ++r)
    for (int s = 0; s < p; ++s) {
      const Range b = plan.output_block(r, s);
      for (int64_t i = 0; i < b.count; ++i)
        ASSERT_TRUE((out[r][b.offset + i] == Tagged{s, r, i})) << "p " << p << " rank " << r << " from " << s;
    }
}

TEST(AllToAllPlan, EqualBlocksLandWhereTheyBelongInPMinusOneSteps) {
  for (int p = 1; p <= 17; ++p)
    for (int64_t each : {0, 1, 3}) {
      const Plan plan = make_plan(Collective::kAllToAll, Algorithm::kPairwise, p, each * p);
      replay_all_to_all(plan);
      EXPECT_EQ(plan.steps.size(), each == 0 ? 0u : static_cast<size_t>(p - 1)) << p;
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(plan.bytes_sent_by(r), (p - 1) * each * 4) << p;
        EXPECT_EQ(result_range(plan, r).count, each * p);
      }
    }
}

TEST(AllToAllPlan, AnyCountsZerosIncluded) {
  for (int p = 1; p <= 9; ++p)
    for (int salt = 0; salt < 4; ++salt) {
      std::vector<int64_t> counts(static_cast<size_t>(p) * p);
      for (int s = 0; s < p; ++s)
        for (int d = 0; d < p; ++d) counts[s * p + d] = (s * 7 + d * 3 + salt) % 5;
      const Plan plan = make_all_to_all_plan(counts, p, 2);
      replay_all_to_all(plan);
      for (int r = 0; r < p; ++r) {
        int64_t sent = 0;
        for (int d = 0; d < p; ++d) sent += d == r ? 0 : counts[r * p + d];
        EXPECT_EQ(plan.bytes_sent_by(r), 2 * sent) << "p " << p << " rank " << r;
      }
    }
}

TEST(AllToAllPlan, RefusalsNameTheCounts) {
  auto message_of = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_NE(message_of([] { make_plan(Collective::kAllToAll, Algorithm::kPairwise, 4, 10); })
                .find("4 equal blocks: 10 elements do not divide"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_all_to_all_plan({1, 2, 3}, 2); }).find("2 x 2 counts"), std::string::npos);
  EXPECT_NE(message_of([] { make_all_to_all_plan({1, -2, 3, 4}, 2); }).find("rank 0 sends rank 1 a negative count"),
            std::string::npos);
  EXPECT_NE(message_of([] { make_plan(Collective::kAllToAll, Algorithm::kRing, 4, 8); }).find("pairwise"),
            std::string::npos);
}

TEST(AllToAllPlan, TextNamesEachBlock) {
  EXPECT_EQ(to_text(make_plan(Collective::kAllToAll, Algorithm::kPairwise, 3, 6)),
            "all_to_all/pairwise: 3 ranks, 6 elements of 4 bytes, 2 steps\n"
            "step 0 (exchange): 0->1 block 8 B, 1->2 block 8 B, 2->0 block 8 B\n"
            "step 1 (exchange): 0->2 block 8 B, 1->0 block 8 B, 2->1 block 8 B\n");
}

}  // namespace
}  // namespace distlab::collectives
