// comm_overlap_of_step against counting microsecond by microsecond: random
// collective, compute and wait spans, some of other ranks and steps.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "trace/event.hpp"
#include "zero/overlap.hpp"

namespace distlab::zero {
namespace {

trace::Event span(const char* category, int rank, int64_t step, int64_t begin, int64_t end) {
  trace::Event e;
  e.category = category;
  e.name = category;
  e.rank = rank;
  e.begin_us = begin;
  e.end_us = end;
  e.args.emplace_back("step", std::to_string(step));
  return e;
}

TEST(CommOverlap, EqualsCountingEveryMicrosecond) {
  std::mt19937 gen(12);
  const char* categories[] = {"zero_all_gather", "zero_reduce_scatter", "zero_forward", "backward", "zero_wait",
                              "unrelated"};
  for (int trial = 0; trial < 50; ++trial) {
    constexpr int64_t kLength = 400;
    std::vector<trace::Event> events;
    std::uniform_int_distribution<int64_t> at(0, kLength - 1), width(1, 60);
    std::uniform_int_distribution<int> kind(0, 5), other(0, 3);
    for (int i = 0; i < 40; ++i) {
      const int64_t begin = at(gen), end = std::min(kLength, begin + width(gen));
      // Mostly rank 1's step 3; some of another rank or step, which must not count.
      const int rank = other(gen) == 0 ? 0 : 1;
      const int64_t step = other(gen) == 0 ? 4 : 3;
      events.push_back(span(categories[kind(gen)], rank, step, begin, end));
    }
    std::vector<int> comm(kLength), compute(kLength), wait(kLength);
    int collectives = 0;
    for (const auto& e : events) {
      if (e.rank != 1 || e.arg("step") != "3") continue;
      const std::string c = e.category;
      std::vector<int>* marks = c == "zero_all_gather" || c == "zero_reduce_scatter" ? &comm
                                : c == "zero_forward" || c == "backward"            ? &compute
                                : c == "zero_wait"                                   ? &wait
                                                                                     : nullptr;
      if (marks == &comm) ++collectives;
      if (marks != nullptr)
        for (int64_t t = e.begin_us; t < e.end_us; ++t) (*marks)[static_cast<size_t>(t)] = 1;
    }
    int64_t comm_us = 0, hidden_us = 0;
    for (size_t t = 0; t < static_cast<size_t>(kLength); ++t) {
      comm_us += comm[t];
      hidden_us += comm[t] && compute[t] && !wait[t];
    }
    const CommOverlap o = comm_overlap_of_step(events, 1, 3, {"zero_forward", "backward"});
    EXPECT_EQ(o.collectives, collectives) << "trial " << trial;
    EXPECT_EQ(o.comm_us, comm_us) << "trial " << trial;
    EXPECT_EQ(o.hidden_us, hidden_us) << "trial " << trial;
    EXPECT_EQ(o.exposed_us(), comm_us - hidden_us) << "trial " << trial;
  }
}

TEST(CommOverlap, NoCollectivesIsZero) {
  const CommOverlap o = comm_overlap_of_step({span("backward", 0, 0, 0, 10)}, 0, 0, {"backward"});
  EXPECT_EQ(o.collectives, 0);
  EXPECT_EQ(o.comm_us, 0);
  EXPECT_EQ(o.fraction(), 0.0);
}

}  // namespace
}  // namespace distlab::zero
