// Counts in words (comm/plural.hpp), as the lessons print them.
#include <gtest/gtest.h>

#include "comm/plural.hpp"

namespace distlab::comm {
namespace {

TEST(Plural, OneIsSingularEveryOtherCountPlural) {
  EXPECT_EQ(counted(1, "rank"), "1 rank");
  EXPECT_EQ(counted(4, "rank"), "4 ranks");
  EXPECT_EQ(counted(0, "step"), "0 steps");
  EXPECT_EQ(counted(1, "timed step"), "1 timed step");
  EXPECT_EQ(counted(3, "timed step"), "3 timed steps");
  EXPECT_EQ(counted(1, "epoch"), "1 epoch");
  EXPECT_EQ(counted(-1, "epoch"), "-1 epochs");
  EXPECT_EQ(counted(1, "batch", "batches"), "1 batch");
  EXPECT_EQ(counted(2, "batch", "batches"), "2 batches");
}

TEST(Plural, ABackendNamesItsRanks) {
  EXPECT_EQ(backend_ranks(4, "threads"), "4 thread ranks");
  EXPECT_EQ(backend_ranks(1, "threads"), "1 thread rank");
  EXPECT_EQ(backend_ranks(2, "gloo"), "2 gloo ranks");
}

}  // namespace
}  // namespace distlab::comm
