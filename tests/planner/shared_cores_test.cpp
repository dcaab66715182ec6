// A schedule on shared cores against timelines worked out by hand: one
// core, two ranks, a forward handed from one to the other.
#include <gtest/gtest.h>

#include "pipeline/action.hpp"
#include "planner/shared_cores.hpp"

namespace distlab::planner {
namespace {

// Rank 0 runs two forwards and sends each on; rank 1 runs each as it comes.
pipeline::Schedule handoff() {
  pipeline::Schedule s;
  s.ranks = 2;
  s.programs = {pipeline::parse_actions("0F0 0SEND_F0 0F1 0SEND_F1"),
                pipeline::parse_actions("1RECV_F0 1F0 1RECV_F1 1F1")};
  return s;
}

SharedCosts one_core() {
  SharedCosts c;
  c.seconds = [](const pipeline::Action&) { return 1.0; };
  c.slowdown = [](double busy) { return std::max(1.0, busy); };  // n busy ranks share one core
  return c;
}

TEST(SharedCores, TwoRanksOnOneCoreEachRunAtHalfSpeedWhileBothHaveWork) {
  // 0F0 alone [0, 1]; then 0F1 and 1F0 together at half speed [1, 3];
  // then 1F1 alone [3, 4].
  const SharedRun run = run_on_shared_cores(handoff(), one_core());
  EXPECT_DOUBLE_EQ(run.makespan, 4.0);
  ASSERT_EQ(run.compute.size(), 2u);
  ASSERT_EQ(run.compute[0].size(), 2u);
  ASSERT_EQ(run.compute[1].size(), 2u);
  EXPECT_DOUBLE_EQ(run.compute[0][1].first, 1.0);
  EXPECT_DOUBLE_EQ(run.compute[0][1].second, 3.0);
  EXPECT_DOUBLE_EQ(run.compute[1][0].second, 3.0);
  EXPECT_DOUBLE_EQ(run.compute[1][1].first, 3.0);
  EXPECT_DOUBLE_EQ(run.busy[0], 3.0);
  EXPECT_DOUBLE_EQ(run.busy[1], 3.0);
  EXPECT_DOUBLE_EQ(run.bubble, 0.25);
}

TEST(SharedCores, CopiesCountAsBusyRanks) {
  // Two copies of the pipeline: 0F0 alone in its pipeline is 2 busy ranks.
  SharedCosts c = one_core();
  c.copies = 2;
  EXPECT_DOUBLE_EQ(run_on_shared_cores(handoff(), c).makespan, 8.0);
}

TEST(SharedCores, MessagesAndWakingDelayTheReceiver) {
  // A message takes 0.5: 1F0 starts at 1.5, while 0F1 ran alone [1, 1.5]
  // (0.5 done), then both at half speed: 0F1 ends at 2.5, 1F0 has 0.5
  // left at 2.5 and ends at 3; F1 arrived at 3.0: 1F1 [3, 4].
  SharedCosts c = one_core();
  c.message_s = 0.5;
  SharedRun run = run_on_shared_cores(handoff(), c);
  EXPECT_DOUBLE_EQ(run.compute[0][1].second, 2.5);
  EXPECT_DOUBLE_EQ(run.compute[1][0].second, 3.0);
  EXPECT_DOUBLE_EQ(run.makespan, 4.0);
  // Waking instead: rank 1 waited for F0 (arrived at 1), goes at 1.5; the
  // same timeline. F1 arrives at 2.5, while rank 1 still runs: no wake.
  c.message_s = 0;
  c.wake_s = 0.5;
  run = run_on_shared_cores(handoff(), c);
  EXPECT_DOUBLE_EQ(run.compute[1][0].first, 1.5);
  EXPECT_DOUBLE_EQ(run.compute[1][1].first, 3.0);
  EXPECT_DOUBLE_EQ(run.makespan, 4.0);
}

TEST(SharedCores, ADeadlockIsNamed) {
  pipeline::Schedule s;
  s.ranks = 2;
  s.programs = {pipeline::parse_actions("0RECV_B0 0F0"), pipeline::parse_actions("1RECV_F0 1F0")};
  try {
    run_on_shared_cores(s, one_core());
    FAIL() << "a deadlock ran";
  } catch (const pipeline::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 waits at action 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distlab::planner
