// ZeRO's shard layout on paper: every element owned by exactly one rank,
// chunks as the collectives cut them (unequal and empty ones included), and
// the table of the header's example.
#include <gtest/gtest.h>

#include "zero/shard_layout.hpp"

namespace distlab::zero {
namespace {

ddp::BucketPlan plan_of(const std::vector<int64_t>& numels, int64_t cap_bytes) {
  std::vector<ddp::ParamInfo> params;
  for (size_t i = 0; i < numels.size(); ++i) params.push_back({"p" + std::to_string(i), numels[i], 4, "float", "cpu"});
  return ddp::plan_buckets(params, ddp::reverse_registration_order(static_cast<int>(numels.size())), cap_bytes,
                           cap_bytes);
}

TEST(ShardLayout, HeaderExample) {
  // Two buckets of 10 and 2 elements (cap 0: one bucket per parameter, the
  // last parameter first), cut for 3 ranks.
  const ShardLayout layout = make_shard_layout(plan_of({2, 10}, 0), 3);
  ASSERT_EQ(layout.buckets(), 2);
  EXPECT_EQ(layout.numel(), 12);
  EXPECT_EQ(layout.text(),
            "rank 0: 5 elements = bucket 0 [0, 4) + bucket 1 [0, 1)\n"
            "rank 1: 4 elements = bucket 0 [4, 7) + bucket 1 [1, 2)\n"
            "rank 2: 3 elements = bucket 0 [7, 10) + bucket 1 [2, 2)\n");
  EXPECT_EQ(layout.shard_offset(1, 0), 4);
  EXPECT_EQ(layout.shard_offset(1, 2), 3);
  EXPECT_NE(layout.json().find("\"shards\":[[[0,4],[0,1]],[[4,3],[1,1]],[[7,3],[2,0]]]"), std::string::npos)
      << layout.json();
}

// Any numel, any p: the chunks of every bucket tile it, in rank order, with
// sizes differing by at most one; the shards add up to everything.
TEST(ShardLayout, ChunksTileEveryBucketForAnyCountAndRanks) {
  for (int p : {1, 2, 3, 4, 5, 7})
    for (int64_t cap : {int64_t{0}, int64_t{40}, int64_t{1} << 30}) {
      const ShardLayout layout = make_shard_layout(plan_of({1, 95, 3, 0, 17, 2}, cap), p);
      int64_t owned = 0;
      for (int b = 0; b < layout.buckets(); ++b) {
        int64_t next = 0, smallest = INT64_MAX, largest = 0;
        for (int r = 0; r < p; ++r) {
          const collectives::Range c = layout.chunk(b, r);
          EXPECT_EQ(c.offset, next) << "p " << p << " bucket " << b << " rank " << r;
          next += c.count;
          smallest = std::min(smallest, c.count);
          largest = std::max(largest, c.count);
        }
        EXPECT_EQ(next, layout.plan.buckets[static_cast<size_t>(b)].numel);
        EXPECT_LE(largest - smallest, 1);
      }
      for (int r = 0; r < p; ++r) owned += layout.shard_numel(r);
      EXPECT_EQ(owned, layout.numel()) << "p " << p << " cap " << cap;
      EXPECT_EQ(layout.numel(), 118);
    }
}

TEST(ShardLayout, MoreRanksThanElementsLeavesSomeShardsEmpty) {
  const ShardLayout layout = make_shard_layout(plan_of({3}, 0), 5);
  EXPECT_EQ(layout.shard_numel(0), 1);
  EXPECT_EQ(layout.shard_numel(2), 1);
  EXPECT_EQ(layout.shard_numel(3), 0);
  EXPECT_EQ(layout.shard_numel(4), 0);
  EXPECT_THROW(make_shard_layout(plan_of({3}, 0), 0), std::invalid_argument);
}

}  // namespace
}  // namespace distlab::zero
