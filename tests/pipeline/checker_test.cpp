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

// The new kinds, corrupted: an action dropped, two swapped, a message at
// the V's turn; each named by the checker.
Schedule build(ScheduleKind kind, int p, int m) { return make_schedule(kind, p, m, stages_per_rank_for(kind, 2)); }

void swap_actions(std::vector<Action>& program, const std::string& a, const std::string& b) {
  std::swap(program[index_of(program, a)], program[index_of(program, b)]);
}

TEST(Checker, ZbvCorruptedIsNamed) {
  Schedule dropped = build(ScheduleKind::kZeroBubbleV, 2, 4);
  auto& prog = dropped.programs[1];
  prog.erase(prog.begin() + static_cast<long>(index_of(prog, "1RECV_F0")));
  expect_rejected(dropped, 1, "1F0", "no 1RECV_F0 before it");

  Schedule swapped = build(ScheduleKind::kZeroBubbleV, 2, 4);
  swap_actions(swapped.programs[1], "2I0", "2W0");
  expect_rejected(swapped, 1, "2W0", "before its input gradient 2I0");

  // Stage 1 -> stage 2 is the turn of the V, on rank 1: no message there.
  Schedule turn = build(ScheduleKind::kZeroBubbleV, 2, 4);
  auto& rank1 = turn.programs[1];
  rank1.insert(rank1.begin() + static_cast<long>(index_of(rank1, "1F0")) + 1, parse_actions("1SEND_F0")[0]);
  expect_rejected(turn, 1, "1SEND_F0", "stage 2 is on this rank: hand over in memory");
}

TEST(Checker, InterleavedZeroBubbleSwapThatDeadlocksIsNamed) {
  Schedule s = build(ScheduleKind::kInterleavedZeroBubble, 2, 4);
  // Rank 0 now waits for stage 2's input before posting stage 0's output
  // that stage 1 (rank 1) needs to produce it.
  swap_actions(s.programs[0], "0SEND_F0", "2RECV_F0");
  const CheckResult r = check(s);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("rank 0 waits at action 1 (2RECV_F0) for message 1->2 F mb 0"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("rank 1 waits at action 0 (1RECV_F0) for message 0->1 F mb 0"), std::string::npos) << r.error;
}

TEST(Checker, DualPipeVCorruptedCompoundIsNamed) {
  // The compound's backward half lost its gradient.
  Schedule dropped = build(ScheduleKind::kDualPipeV, 2, 4);
  auto& prog = dropped.programs[0];
  prog.erase(prog.begin() + static_cast<long>(index_of(prog, "0RECV_B0")));
  expect_rejected(dropped, 0, "(3F2;0B0)OVERLAP_F_B", "its half 0B0: its output gradient was not received");

  // Two compounds swapped: the forward half of the first now needs the
  // forward of the other, which has not run.
  Schedule swapped = build(ScheduleKind::kDualPipeV, 2, 4);
  swap_actions(swapped.programs[1], "(1F3;2B1)OVERLAP_F_B", "(2F3;1B1)OVERLAP_F_B");
  expect_rejected(swapped, 1, "(2F3;1B1)OVERLAP_F_B", "its half 2F3: its input, 1F3 on this rank, has not run yet");

  // Halves that depend on each other cannot overlap: 1B3 needs 1F3, so
  // (1F3;1B3) is refused although a CPU running the halves in order could.
  Schedule chained = build(ScheduleKind::kDualPipeV, 2, 4);
  auto& rank1 = chained.programs[1];
  rank1[index_of(rank1, "(1F3;2B1)OVERLAP_F_B")] = parse_actions("(1F3;1B3)OVERLAP_F_B")[0];
  expect_rejected(chained, 1, "(1F3;1B3)OVERLAP_F_B", "its half 1B3: backward before its forward 1F3");
}

// Whatever single action goes missing, the checker notices.
TEST(Checker, EveryDroppedActionOfTheNewKindsIsCaught) {
  for (ScheduleKind kind :
       {ScheduleKind::kInterleavedZeroBubble, ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV})
    for (int p : {1, 2, 3, 4}) {
      const Schedule s = build(kind, p, 2 * p);
      ASSERT_TRUE(check(s).ok) << s.describe() << ": " << check(s).error;
      for (int r = 0; r < p; ++r)
        for (size_t k = 0; k < s.programs[r].size(); ++k) {
          Schedule t = s;
          t.programs[r].erase(t.programs[r].begin() + static_cast<long>(k));
          EXPECT_FALSE(check(t).ok) << s.describe() << ": dropping rank " << r << "'s " << to_string(s.programs[r][k])
                                    << " went unnoticed";
        }
    }
}

TEST(Checker, ExtraSendIsNamed) {
  Schedule s = gpipe_2x4();
  s.programs[0].push_back(parse_actions("0SEND_F0")[0]);
  expect_rejected(s, 0, "0SEND_F0", "second time");
}

}  // namespace
}  // namespace distlab::pipeline
