// The bucket plan as data: limits, the small first bucket, reverse order,
// dtype groups, and the rebuild from the order gradients became ready.
#include <gtest/gtest.h>

#include "ddp/bucket_plan.hpp"

namespace distlab::ddp {
namespace {

std::vector<ParamInfo> floats(const std::vector<int64_t>& numels) {
  std::vector<ParamInfo> out;
  for (size_t i = 0; i < numels.size(); ++i) out.push_back({"p" + std::to_string(i), numels[i], 4, "float", "cpu"});
  return out;
}

std::vector<std::vector<int>> layout(const BucketPlan& plan) {
  std::vector<std::vector<int>> out;
  for (const auto& b : plan.buckets) out.push_back(b.params);
  return out;
}

TEST(BucketPlan, ReverseOrderSmallFirstBucketThenCap) {
  // Sizes in bytes: 400 each. First limit 1000 bytes: closes after 3 (1200,
  // overshooting by one tensor), then cap 2000: 5 per bucket.
  const auto params = floats(std::vector<int64_t>(12, 100));
  const auto plan = plan_buckets(params, reverse_registration_order(12), 1000, 2000);
  EXPECT_EQ(layout(plan), (std::vector<std::vector<int>>{{11, 10, 9}, {8, 7, 6, 5, 4}, {3, 2, 1, 0}}));
  EXPECT_EQ(plan.buckets[0].bytes, 1200);
  EXPECT_EQ(plan.buckets[0].limit, 1000);
  EXPECT_EQ(plan.buckets[1].limit, 2000);
  EXPECT_EQ(plan.buckets[2].bytes, 1600);  // the last one is whatever is left
}

TEST(BucketPlan, DefaultsAreOneAndTwentyFiveMebibytes) {
  EXPECT_EQ(kDefaultFirstBucketBytes, 1048576);
  EXPECT_EQ(kDefaultBucketCapBytes, 26214400);
  // 40 params of 1 MiB each: the first bucket takes one, then 25 per bucket.
  const auto params = floats(std::vector<int64_t>(40, kMiB / 4));
  const auto plan = plan_buckets(params, reverse_registration_order(40), kDefaultFirstBucketBytes, kDefaultBucketCapBytes);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[0].params.size(), 1u);
  EXPECT_EQ(plan.buckets[1].params.size(), 25u);
  EXPECT_EQ(plan.buckets[2].params.size(), 14u);
}

TEST(BucketPlan, BigTensorGetsABucketOfItsOwnAndCapZeroMeansOnePerParameter) {
  const auto params = floats({10, 5000, 10, 10});
  const auto plan = plan_buckets(params, {3, 2, 1, 0}, 100, 100);
  EXPECT_EQ(layout(plan), (std::vector<std::vector<int>>{{3, 2, 1}, {0}}));
  const auto each = plan_buckets(params, {3, 2, 1, 0}, 0, 0);
  EXPECT_EQ(layout(each), (std::vector<std::vector<int>>{{3}, {2}, {1}, {0}}));
}

TEST(BucketPlan, DtypesNeverShareABucket) {
  auto params = floats({100, 100, 100, 100});
  params[1].dtype = params[3].dtype = "double";
  params[1].element_size = params[3].element_size = 8;
  const auto plan = plan_buckets(params, {3, 2, 1, 0}, 1 << 20, 1 << 20);
  EXPECT_EQ(layout(plan), (std::vector<std::vector<int>>{{3, 1}, {2, 0}}));
}

TEST(BucketPlan, RebuildFollowsReadyOrderAndOffsetsPack) {
  const auto params = floats({4, 4, 4, 4, 4});
  const std::vector<int> ready = {2, 4, 3, 0, 1};
  const auto plan = plan_buckets(params, ready, 32, 48);
  EXPECT_EQ(layout(plan), (std::vector<std::vector<int>>{{2, 4}, {3, 0, 1}}));
  EXPECT_EQ(plan.bucket_of(), (std::vector<int>{1, 1, 0, 1, 0}));
  EXPECT_EQ(plan.offset_of(), (std::vector<int64_t>{4, 8, 0, 0, 4}));
  EXPECT_EQ(plan.order, ready);
}

TEST(BucketPlan, BadOrderIsRefused) {
  const auto params = floats({1, 1, 1});
  EXPECT_THROW(plan_buckets(params, {0, 1}, 10, 10), std::invalid_argument);
  EXPECT_THROW(plan_buckets(params, {0, 1, 1}, 10, 10), std::invalid_argument);
  EXPECT_THROW(plan_buckets(params, {0, 1, 3}, 10, 10), std::invalid_argument);
}

TEST(BucketPlan, TextAndJsonNameEveryParameter) {
  const auto plan = plan_buckets(floats({2, 3}), {1, 0}, 100, 100);
  EXPECT_EQ(plan.text(), "bucket 0  0.00 MiB  2 params: p1 p0\n");
  EXPECT_EQ(plan.json(), "{\"buckets\":[{\"bytes\":20,\"params\":[1,0]}],\"names\":[\"p0\",\"p1\"],\"sizes\":[8,12]}");
}

}  // namespace
}  // namespace distlab::ddp
