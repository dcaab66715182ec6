// Corrupted schedules are rejected, and the error names the first action
// that is wrong.
#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline/checker.hpp"

namespace distlab::pipeline {
namespace {

Schedule gpipe_2x4() { return make_schedule(ScheduleKind::kGPipe, 2, 4); }

size_t index_of(const std::vector<Action>& program, const std::string& action) {
  const Action a = parse_actions(action).at(0);
  auto it = std::find(program.begin(), program.end(), a);
  EXPECT_NE(it, program.end()) << action;
  return static_cast<size_t>(it - program.begin());
}

void expect_rejected(const Schedule& s, int rank, const std::string& action, const std::string& words) {
  const CheckResult r = check(s);
  ASSERT_FALSE(r.ok) << "accepted:\n" << to_string(s.programs[rank]);
  EXPECT_EQ(r.rank, rank) << r.error;
  EXPECT_NE(r.error.find("(" + action + ")"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(words), std::string::npos) << r.error;
  EXPECT_THROW(validate(s), ScheduleError);
}

TEST(Checker, AcceptsTheBuiltSchedule) {
  EXPECT_TRUE(check(gpipe_2x4()).ok);
  EXPECT_NO_THROW(validate(gpipe_2x4()));
}

TEST(Checker, DroppedRecvIsNamed) {
  Schedule s = gpipe_2x4();
  auto& prog = s.programs[1];
  prog.erase(prog.begin() + static_cast<long>(index_of(prog, "1RECV_F2")));
  expect_rejected(s, 1, "1F2", "no 1RECV_F2 before it");
  EXPECT_EQ(check(s).index, static_cast<int>(index_of(prog, "1F2")));
}

// Rank 0 posts its first activation only after waiting for that
// microbatch's gradient, which needs the activation: a cycle.
TEST(Checker, SwappedOrderThatDeadlocksIsNamed) {
  Schedule s = make_schedule(ScheduleKind::k1F1B, 2, 4);
  auto& prog = s.programs[0];
  EXPECT_TRUE(check(s).ok);
  const Action send = prog[index_of(prog, "0SEND_F0")];
  prog.erase(prog.begin() + static_cast<long>(index_of(prog, "0SEND_F0")));
  prog.insert(prog.begin() + static_cast<long>(index_of(prog, "0RECV_B0")) + 1, send);
  const CheckResult r = check(s);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("deadlock"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("rank 0 waits at action 3 (0RECV_B0)"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("rank 1 waits at action 0 (1RECV_F0)"), std::string::npos) << r.error;
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.index, 3);
}

TEST(Checker, DuplicatedMicrobatchIsNamed) {
  Schedule s = gpipe_2x4();
  auto& prog = s.programs[0];
  prog[index_of(prog, "0F3")] = parse_actions("0F2")[0];
  const CheckResult r = check(s);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.index, 6) << r.error;  // the second 0F2
  expect_rejected(s, 0, "0F2", "second time");
}

TEST(Checker, BackwardBeforeForwardIsNamed) {
  Schedule s = gpipe_2x4();
  auto& prog = s.programs[1];
  const size_t b = index_of(prog, "1B0");
  const Action backward = prog[b];
  prog.erase(prog.begin() + static_cast<long>(b));
  prog.insert(prog.begin() + 1, backward);  // 1RECV_F0 1B0 1F0 ...
  expect_rejected(s, 1, "1B0", "backward before its forward 1F0");
}

TEST(Checker, WeightGradientBeforeInputGradientIsNamed) {
  Schedule s = make_schedule(ScheduleKind::kZeroBubbleH1, 2, 4);
  auto& prog = s.programs[1];
  std::swap(prog[index_of(prog, "1I0")], prog[index_of(prog, "1W0")]);
  expect_rejected(s, 1, "1W0", "before its input gradient");
}

TEST(Checker, MissingBackwardAndWrongRankAreNamed) {
  Schedule s = gpipe_2x4();
  s.programs[0].pop_back();  // 0B3
  EXPECT_NE(check(s).error.find("missing the backward of 0F3"), std::string::npos) << check(s).error;

  Schedule t = gpipe_2x4();
  t.programs[0][0] = parse_actions("1F0")[0];
  expect_rejected(t, 0, "1F0", "lives on rank 1");
}

TEST(Checker, ExtraSendIsNamed) {
  Schedule s = gpipe_2x4();
  s.programs[0].push_back(parse_actions("0SEND_F0")[0]);
  expect_rejected(s, 0, "0SEND_F0", "second time");
}

}  // namespace
}  // namespace distlab::pipeline
