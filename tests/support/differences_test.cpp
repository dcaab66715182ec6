// differences.hpp: a NaN or an infinity anywhere, in a tensor or among
// finite differences already folded, gives a difference that fails every
// tolerance; finite differences are the plain largest |a - b|.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "support/differences.hpp"

namespace distlab::test_support {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(Differences, FiniteTensorsGiveTheLargestAbsoluteDifference) {
  const at::Tensor a = at::tensor({1.0f, 2.0f, 3.0f}), b = at::tensor({1.0f, 2.5f, 2.0f});
  EXPECT_DOUBLE_EQ(largest_difference(a, b), 1.0);
  EXPECT_DOUBLE_EQ(largest_difference(a, a), 0.0);
  EXPECT_DOUBLE_EQ(largest_relative_difference(b, a), 1.0 / 3.0);
  EXPECT_TRUE(within(largest_difference(a, b), 1.0));
  EXPECT_FALSE(within(largest_difference(a, b), 0.5));
  EXPECT_DOUBLE_EQ(largest_difference(at::zeros({0}), at::zeros({0})), 0.0);
  EXPECT_DOUBLE_EQ(largest_relative_difference(at::zeros({0}), at::zeros({0})), 0.0);
}

TEST(Differences, NanOrInfinityInATensorFailsEveryTolerance) {
  const at::Tensor finite = at::tensor({1.0f, 2.0f, 3.0f});
  for (double bad : {kNan, kInfinite, -kInfinite}) {
    at::Tensor broken = finite.clone();
    broken[1] = bad;
    for (const double d : {largest_difference(broken, finite), largest_difference(finite, broken),
                           largest_difference(broken, broken), largest_relative_difference(broken, finite),
                           largest_relative_difference(finite, broken)}) {
      EXPECT_EQ(d, kInfinite) << bad;
      EXPECT_FALSE(within(d, 1e30)) << bad;
      EXPECT_FALSE(d <= 1e30) << bad;
      EXPECT_FALSE(exceeds(d, 0.0)) << bad << ": a broken result is not a difference that shows movement";
    }
  }
}

TEST(Differences, ShapesThatDifferAndMissingTensorsFail) {
  EXPECT_EQ(largest_difference(at::zeros({2, 3}), at::zeros({3, 2})), kInfinite);
  EXPECT_EQ(largest_difference(at::zeros({2}), at::Tensor()), kInfinite);
  EXPECT_EQ(largest_difference(at::Tensor(), at::Tensor()), kInfinite);
}

TEST(Differences, NanAfterFiniteValuesStaysInTheWorst) {
  Worst worst;
  worst.add(1e-7);
  worst.add(3e-6);
  EXPECT_DOUBLE_EQ(worst.value, 3e-6);
  worst.add(kNan);
  worst.add(1e-7);  // a finite value after the NaN does not bring it back
  EXPECT_EQ(worst.value, kInfinite);
  EXPECT_FALSE(within(worst.value, 1e-5));

  Worst from_tensors;
  from_tensors.add(at::ones({3}), at::ones({3}));
  at::Tensor nan_gradient = at::ones({3});
  nan_gradient[2] = kNan;
  from_tensors.add(nan_gradient, at::ones({3}));
  from_tensors.add(at::ones({3}), at::ones({3}));
  EXPECT_EQ(from_tensors.value, kInfinite);

  EXPECT_DOUBLE_EQ(worst_of({1e-7, 2e-6, 3e-8}), 2e-6);
  for (double bad : {kNan, kInfinite, -kInfinite}) {
    EXPECT_EQ(worst_of({1e-7, 2e-6, bad}), kInfinite) << bad;
    EXPECT_EQ(worst_of({bad, 1e-7, 2e-6}), kInfinite) << bad;
    EXPECT_FALSE(within(worst_of({1e-7, bad, 2e-6}), 1e-5)) << bad;
  }
  // What the fold replaces: std::max drops a NaN that comes after a finite value.
  EXPECT_EQ(std::max(0.0, kNan), 0.0);
}

TEST(Differences, LoneComparisons) {
  EXPECT_TRUE(within(0.0, 0.0));
  EXPECT_TRUE(within(-1e-6, 1e-5));
  EXPECT_FALSE(within(kNan, 1e-5));
  EXPECT_FALSE(within(kInfinite, kInfinite));
  EXPECT_TRUE(exceeds(1e-2, 1e-3));
  EXPECT_FALSE(exceeds(1e-4, 1e-3));
  EXPECT_FALSE(exceeds(kNan, 1e-3));
  EXPECT_EQ(as_difference(-2.0), 2.0);
  EXPECT_EQ(as_difference(kNan), kInfinite);
}

}  // namespace
}  // namespace distlab::test_support
