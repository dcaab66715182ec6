// The scores --measure prints, against values worked out by hand.
#include <gtest/gtest.h>

#include "planner/scores.hpp"

namespace distlab::planner {
namespace {

TEST(Scores, RanksShareTheirMeanWhenTied) {
  EXPECT_EQ(ranks_of({10, 30, 20, 20}), (std::vector<double>{1, 4, 2.5, 2.5}));
}

TEST(Scores, SpearmanAgainstHandValues) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0);
  // ranks (1,2,3,4) against (2,1,4,3): 1 - 6 * (1+1+1+1) / (4 * 15) = 0.6
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {2, 1, 4, 3}), 0.6, 1e-12);
}

TEST(Scores, ErrorAndRegretAgainstHandValues) {
  // predicted 1.1, 2.0, 2.5 s; measured 1.0, 2.5, 2.0 s: errors 10 %, 20 %, 25 %.
  const Scores s = score({1.1, 2.0, 2.5}, {1.0, 2.5, 2.0});
  EXPECT_NEAR(s.mean_abs_error, (0.1 + 0.2 + 0.25) / 3, 1e-12);
  EXPECT_NEAR(s.worst_abs_error, 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(s.regret, 0);  // predicted best (1.1) is the measured best (1.0)
  // The predicted best (0.5) ran 3.0 s against the fastest 2.0 s: 50 % regret.
  EXPECT_NEAR(score({0.5, 1.0}, {3.0, 2.0}).regret, 0.5, 1e-12);
}

}  // namespace
}  // namespace distlab::planner
