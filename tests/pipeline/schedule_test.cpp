// The builders against orders written out by hand, and every schedule through
// the checker for p in 1..8 and many m and v.
#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline/checker.hpp"
#include "pipeline/schedule.hpp"

namespace distlab::pipeline {
namespace {

std::vector<std::string> as_text(const std::vector<std::vector<Action>>& programs) {
  std::vector<std::string> out;
  for (const auto& p : programs) out.push_back(to_string(p));
  return out;
}

TEST(Action, PrintsAndParsesLikeTorch) {
  EXPECT_EQ(to_string(Action{ActionType::kForward, 2, 0}), "2F0");
  EXPECT_EQ(to_string(Action{ActionType::kSendB, 1, 13}), "1SEND_B13");
  const std::string text = "0F0 0SEND_F0 1RECV_F0 1B0 1SEND_B0 0RECV_B0 0I0 0W0 11B12";
  EXPECT_EQ(to_string(parse_actions(text)), text);
  EXPECT_EQ(parse_actions("3W7")[0], (Action{ActionType::kBackwardWeight, 3, 7}));
  EXPECT_THROW(parse_actions("0X0"), ScheduleError);
  EXPECT_THROW(parse_actions("F0"), ScheduleError);
}

// torch's compound action: "(0F3;1B1)OVERLAP_F_B", its halves F then B.
TEST(Action, OverlapFBPrintsAndParsesLikeTorch) {
  const Action a = overlap_fb({ActionType::kForward, 0, 3}, {ActionType::kBackward, 1, 1});
  EXPECT_EQ(to_string(a), "(0F3;1B1)OVERLAP_F_B");
  const std::string text = "2RECV_B1 (3F2;2B1)OVERLAP_F_B 3SEND_F2";
  EXPECT_EQ(to_string(parse_actions(text)), text);
  EXPECT_EQ(parse_actions("(0F3;1B1)OVERLAP_F_B")[0], a);
  EXPECT_NE(parse_actions("(0F3;1B2)OVERLAP_F_B")[0], a);  // the backward's microbatch counts in ==
  ASSERT_EQ(parts(a).size(), 2u);
  EXPECT_EQ(parts(a)[0], (Action{ActionType::kForward, 0, 3}));
  EXPECT_EQ(parts(a)[1], (Action{ActionType::kBackward, 1, 1}));
  EXPECT_TRUE(is_compute(a.type));
  EXPECT_THROW(parse_actions("(0B3;1F1)OVERLAP_F_B"), ScheduleError);  // F first, then B
  EXPECT_THROW(parse_actions("(0F3;1B1)OVERLAP"), ScheduleError);
  EXPECT_THROW(parse_actions("(0F3 1B1)OVERLAP_F_B"), ScheduleError);
}

// GPipe, p=2, m=4: all forwards, then all backwards, messages around each.
TEST(Builders, GPipeTwoStagesFourMicrobatchesByHand) {
  const Schedule s = make_schedule(ScheduleKind::kGPipe, 2, 4);
  EXPECT_EQ(as_text(s.programs), (std::vector<std::string>{
      "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0F3 0SEND_F3 0RECV_B0 0B0 0RECV_B1 0B1 0RECV_B2 0B2 0RECV_B3 0B3",
      "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2 1RECV_F3 1F3 1B0 1SEND_B0 1B1 1SEND_B1 1B2 1SEND_B2 1B3 1SEND_B3"}));
}

// 1F1B, p=2, m=4: stage 0 warms up with one forward, stage 1 with none.
TEST(Builders, OneFOneBTwoStagesFourMicrobatchesByHand) {
  const Schedule s = make_schedule(ScheduleKind::k1F1B, 2, 4);
  EXPECT_EQ(as_text(s.programs), (std::vector<std::string>{
      "0F0 0SEND_F0 "
      "0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0F3 0SEND_F3 0RECV_B2 0B2 "
      "0RECV_B3 0B3",
      "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2 1RECV_F3 1F3 1B3 1SEND_B3"}));
}

TEST(Builders, GPipeFourStagesEightMicrobatchesByHand) {
  const auto order = gpipe_order(4, 8);
  for (int r = 0; r < 4; ++r) {
    const std::string s = std::to_string(r);
    std::string expected;
    for (int i = 0; i < 8; ++i) expected += (i ? " " : "") + s + "F" + std::to_string(i);
    for (int i = 0; i < 8; ++i) expected += " " + s + "B" + std::to_string(i);
    EXPECT_EQ(to_string(order[r]), expected) << "rank " << r;
  }
}

// 1F1B, p=4, m=8: warm-up 3, 2, 1, 0 forwards; steady F/B pairs; cool-down.
TEST(Builders, OneFOneBFourStagesEightMicrobatchesByHand) {
  EXPECT_EQ(as_text(one_f_one_b_order(4, 8)), (std::vector<std::string>{
      "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7",
      "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1B7",
      "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2F6 2B5 2F7 2B6 2B7",
      "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7"}));
  // With the messages, stage 3 of p=4 m=8 reads as it does for p=2.
  const Schedule s = make_schedule(ScheduleKind::k1F1B, 4, 8);
  EXPECT_EQ(to_string(s.programs[3]).substr(0, 36), "3RECV_F0 3F0 3B0 3SEND_B0 3RECV_F1 3");
}

// Interleaved, p=2, m=2, v=2: rank 0 holds stages 0 and 2.
TEST(Builders, InterleavedTwoRanksTwoChunksByHand) {
  // warm-up on rank 0: (v-1) g + 2 (p-1-0) = 2 + 2 = 4 = all forwards; rank 1: 2.
  EXPECT_EQ(as_text(interleaved_order(2, 2, 2)), (std::vector<std::string>{
      "0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1",
      "1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1"}));
  EXPECT_EQ(as_text(looped_bfs_order(2, 2, 2)), (std::vector<std::string>{
      "0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0",
      "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0"}));
}

// The compute actions of each program, its messages left out.
std::vector<std::string> compute_text(const std::vector<std::vector<Action>>& programs) {
  std::vector<std::vector<Action>> compute(programs.size());
  for (size_t r = 0; r < programs.size(); ++r)
    for (const Action& a : programs[r])
      if (is_compute(a.type)) compute[r].push_back(a);
  return as_text(compute);
}

// The V orders below are torch's, each rank's list from
// _calculate_single_rank_operations(rank) of ScheduleZBVZeroBubble and
// ScheduleDualPipeV in torch/distributed/pipelining/schedules.py
// (pytorch/pytorch at commit 00722e648b740f91d0e71494baa17891749fd291),
// its None padding left out. Rank r holds stages r and 2p-1-r.

// ZBV, p=2, m=4: rank 0 warms up with 3 forwards of stage 0, then F I W of
// stage 3; no rank waits once it has started (every action one unit).
TEST(Builders, ZbvTwoRanksFourMicrobatchesLikeTorch) {
  const std::vector<std::string> torch = {
      "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3",
      "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3"};
  EXPECT_EQ(as_text(zbv_order(2, 4)), torch);
  EXPECT_EQ(compute_text(make_schedule(ScheduleKind::kZeroBubbleV, 2, 4, 2).programs), torch);
}

// ZBV, p=3, m=4: fewer microbatches than the 2p-1 = 5 the V is built for;
// torch builds it for 5 and drops microbatch 4's actions.
TEST(Builders, ZbvThreeRanksFourMicrobatchesLikeTorch) {
  const std::vector<std::string> torch = {
      "0F0 0F1 0F2 0F3 5F0 5I0 5W0 5F1 5I1 5W1 5F2 5I2 5W2 0I0 0W0 5F3 5I3 5W3 0I1 0W1 0I2 0W2 0I3 0W3",
      "1F0 1F1 1F2 4F0 1F3 4F1 4I0 4W0 4F2 4I1 4W1 1I0 1W0 4F3 4I2 4W2 1I1 1W1 4I3 4W3 1I2 1I3 1W2 1W3",
      "2F0 3F0 2F1 3F1 2F2 3F2 3I0 3W0 2F3 2I0 2W0 3F3 3I1 3W1 2I1 2W1 3I2 3W2 2I2 3I3 2I3 2W2 3W3 2W3"};
  EXPECT_EQ(as_text(zbv_order(3, 4)), torch);
  EXPECT_EQ(compute_text(make_schedule(ScheduleKind::kZeroBubbleV, 3, 4, 2).programs), torch);
}

// DualPipeV, p=2, m=4 (the least m it takes, 2p): on rank 1 = p-1 the
// first pair of step 4 runs apart (1F2, 2B0), every other pair as one
// OVERLAP_F_B.
TEST(Builders, DualPipeVTwoRanksFourMicrobatchesLikeTorch) {
  const std::vector<std::string> torch = {
      "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 (3F3;0B1)OVERLAP_F_B 3B3 "
      "0I2 0W2 0I3 0W3",
      "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B (2F3;1B1)OVERLAP_F_B 2B2 1B2 "
      "2I3 1I3 2W3 1W3"};
  EXPECT_EQ(as_text(dualpipev_order(2, 4)), torch);
  EXPECT_EQ(compute_text(make_schedule(ScheduleKind::kDualPipeV, 2, 4, 2).programs), torch);
}

// DualPipeV, p=3, m=7: an odd m, and a middle rank.
TEST(Builders, DualPipeVThreeRanksSevenMicrobatchesLikeTorch) {
  const std::vector<std::string> torch = {
      "0F0 0F1 0F2 0F3 0F4 5F0 5I0 5W0 5F1 5I1 5W1 5F2 (0F5;5B2)OVERLAP_F_B (5F3;0B0)OVERLAP_F_B "
      "(0F6;5B3)OVERLAP_F_B (5F4;0B1)OVERLAP_F_B 5B4 (5F5;0B2)OVERLAP_F_B 5B5 (5F6;0B3)OVERLAP_F_B 5B6 "
      "0I4 0W4 0I5 0W5 0I6 0W6",
      "1F0 1F1 1F2 4F0 1F3 4F1 4I0 4W0 4F2 (1F4;4B1)OVERLAP_F_B (4F3;1B0)OVERLAP_F_B (1F5;4B2)OVERLAP_F_B "
      "(4F4;1B1)OVERLAP_F_B (1F6;4B3)OVERLAP_F_B (4F5;1B2)OVERLAP_F_B 4B4 (4F6;1B3)OVERLAP_F_B 4B5 1B4 "
      "4I6 1I5 4W6 1I6 1W5 1W6",
      "2F0 3F0 2F1 3F1 2F2 3F2 2F3 3B0 (3F3;2B0)OVERLAP_F_B (2F4;3B1)OVERLAP_F_B (3F4;2B1)OVERLAP_F_B "
      "(2F5;3B2)OVERLAP_F_B (3F5;2B2)OVERLAP_F_B (2F6;3B3)OVERLAP_F_B (3F6;2B3)OVERLAP_F_B 3B4 2B4 3B5 "
      "2I5 3I6 2I6 2W5 3W6 2W6"};
  EXPECT_EQ(as_text(dualpipev_order(3, 7)), torch);
  EXPECT_EQ(compute_text(make_schedule(ScheduleKind::kDualPipeV, 3, 7, 2).programs), torch);
}

TEST(Builders, RejectInvalidParametersWithTheRule) {
  EXPECT_THROW(make_schedule(ScheduleKind::kGPipe, 0, 4), ScheduleError);
  EXPECT_THROW(make_schedule(ScheduleKind::k1F1B, 2, 0), ScheduleError);
  try {
    make_schedule(ScheduleKind::k1F1B, 2, 4, 2);
    FAIL() << "1F1B with v=2 was accepted";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("interleaved"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_kind("Interleaved_1F1B"), ScheduleKind::kInterleaved1F1B);
  EXPECT_EQ(parse_kind("zb-h1"), ScheduleKind::kZeroBubbleH1);
  EXPECT_THROW(parse_kind("pipedream"), ScheduleError);
}

// Each name reads back, and torch's class names (without "Schedule") too.
TEST(Builders, EveryKindHasANameThatParsesBack) {
  for (ScheduleKind kind : all_kinds()) EXPECT_EQ(parse_kind(kind_name(kind)), kind) << kind_name(kind);
  EXPECT_EQ(parse_kind("InterleavedZeroBubble"), ScheduleKind::kInterleavedZeroBubble);
  EXPECT_EQ(parse_kind("interleaved-zb"), ScheduleKind::kInterleavedZeroBubble);
  EXPECT_EQ(parse_kind("ZBVZeroBubble"), ScheduleKind::kZeroBubbleV);
  EXPECT_EQ(parse_kind("DualPipeV"), ScheduleKind::kDualPipeV);
  try {
    parse_kind("dualpipe");
    FAIL() << "dualpipe (bidirectional, two copies of the model) was accepted";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("dualpipev"), std::string::npos) << e.what();
  }
}

std::string error_of(ScheduleKind kind, int p, int m, int v) {
  try {
    make_schedule(kind, p, m, v);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "accepted";
}

void expect_words(const std::string& text, const std::vector<std::string>& words) {
  for (const std::string& w : words) EXPECT_NE(text.find(w), std::string::npos) << "no '" << w << "' in: " << text;
}

// The new kinds' rules, each named with its fix.
TEST(Builders, RejectTheNewKindsRulesWithTheFix) {
  // p = 4, m = 6: one round (6 / 4 = 1), fine; m = 9: 2 rounds, 9 % 2 != 0.
  EXPECT_EQ(error_of(ScheduleKind::kInterleavedZeroBubble, 4, 6, 2), "accepted");
  expect_words(error_of(ScheduleKind::kInterleavedZeroBubble, 4, 9, 2),
               {"interleaved_zb p=4 m=9", "multiple of its number of rounds", "= 2", "choose m = 8"});
  expect_words(error_of(ScheduleKind::kZeroBubbleV, 4, 8, 1), {"zbv", "exactly two stages per rank", "v=1", "use v=2"});
  expect_words(error_of(ScheduleKind::kDualPipeV, 4, 8, 3), {"dualpipev", "exactly two stages", "v=3"});
  expect_words(error_of(ScheduleKind::kDualPipeV, 4, 7, 2), {"dualpipev p=4 m=7", "m >= 2p = 8", "choose m >= 8"});
  EXPECT_EQ(error_of(ScheduleKind::kDualPipeV, 4, 8, 2), "accepted");
  expect_words(error_of(ScheduleKind::kZeroBubbleH1, 2, 4, 2), {"one stage per rank", "interleaved_zb"});
}

// V placement: rank r holds stages r and 2p-1-r, its local stages 0 and 1.
TEST(Placement, VPutsStageRAndTwoPMinusOneMinusROnRankR) {
  const Schedule s = make_schedule(ScheduleKind::kZeroBubbleV, 4, 8, 2);
  EXPECT_EQ(s.placement, Placement::kV);
  const int want_rank[8] = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int stage = 0; stage < 8; ++stage) {
    EXPECT_EQ(s.rank_of_stage(stage), want_rank[stage]) << "stage " << stage;
    EXPECT_EQ(s.local_index(stage), stage < 4 ? 0 : 1) << "stage " << stage;
  }
  const Schedule loop = make_schedule(ScheduleKind::kInterleavedZeroBubble, 4, 8, 2);
  EXPECT_EQ(loop.placement, Placement::kLoop);
  for (int stage = 0; stage < 8; ++stage) EXPECT_EQ(loop.rank_of_stage(stage), stage % 4) << "stage " << stage;
  for (ScheduleKind kind : all_kinds())
    EXPECT_EQ(placement_of(kind) == Placement::kV,
              kind == ScheduleKind::kZeroBubbleV || kind == ScheduleKind::kDualPipeV)
        << kind_name(kind);
}

// At the V's turn stage p-1 hands stage p its activation in memory: rank
// p-1 neither sends 3F nor receives 4F (p = 4), and the gradient comes back
// the same way; every other hop is a message, each sent once and received
// once. Stage 0 and the last stage (the loss) are both on rank 0.
TEST(Placement, TheTurnOfTheVIsNoMessage) {
  for (ScheduleKind kind : {ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV}) {
    const int p = 4, m = 8;
    const Schedule s = make_schedule(kind, p, m, 2);
    int sends = 0, recvs = 0;
    for (int r = 0; r < p; ++r)
      for (const Action& a : s.programs[r]) {
        if (is_send(a.type) || is_recv(a.type)) {
          // the lower stage of the hop the message crosses
          const int hop = a.type == ActionType::kSendF || a.type == ActionType::kRecvB ? a.stage : a.stage - 1;
          EXPECT_NE(hop, p - 1) << kind_name(kind) << " " << to_string(a) << " crosses the turn";
        }
        sends += is_send(a.type);
        recvs += is_recv(a.type);
      }
    // 2p - 1 hops, one of them in memory, each microbatch both ways
    EXPECT_EQ(sends, 2 * (2 * p - 2) * m) << kind_name(kind);
    EXPECT_EQ(recvs, sends) << kind_name(kind);
  }
}

// DualPipeV's compound actions, counted from torch's step list (step 4:
// m-2p+r+1 pairs, the first on rank p-1 apart; step 5: p-r-1 more), and
// both halves of each on this rank's two stages, the forward and the
// backward on different ones.
TEST(Builders, DualPipeVOverlapsAsManyAsTorchsSteps) {
  for (int p = 1; p <= 6; ++p)
    for (int m : {2 * p, 2 * p + 1, 3 * p, 20}) {
      const Schedule s = make_schedule(ScheduleKind::kDualPipeV, p, m, 2);
      for (int r = 0; r < p; ++r) {
        int overlaps = 0;
        for (const Action& a : s.programs[r]) {
          if (a.type != ActionType::kOverlapFB) continue;
          ++overlaps;
          EXPECT_EQ(s.rank_of_stage(a.stage), r);
          EXPECT_EQ(s.rank_of_stage(a.backward_stage), r);
          EXPECT_NE(a.stage, a.backward_stage);
        }
        const int want = 2 * (m - 2 * p + r + 1) - (r == p - 1 ? 1 : 0) + (p - r - 1);
        EXPECT_EQ(overlaps, want) << "p=" << p << " m=" << m << " rank " << r;
      }
    }
}

// What make_schedule must accept, written from torch's rules
// (schedules.py) independently of the builders: interleaved zero bubble
// needs m % max(1, m / p) == 0, DualPipeV m >= 2p; the rest any m >= 1.
bool torch_accepts(ScheduleKind kind, int p, int m) {
  if (kind == ScheduleKind::kInterleavedZeroBubble) return m % std::max(1, m / p) == 0;
  if (kind == ScheduleKind::kDualPipeV) return m >= 2 * p;
  return true;
}

// Every schedule, every p in 1..8, many m (including m < p and m not a
// multiple of p) and v: valid where the rules accept the shape, refused
// with the rule where they do not, and each rank's program holds exactly
// m forwards per stage it owns (a compound's forward counted too).
TEST(Builders, EveryScheduleIsValidForManyShapes) {
  int checked = 0, refused = 0;
  for (ScheduleKind kind : all_kinds()) {
    const int v_max = stages_per_rank_for(kind, 4), v_min = placement_of(kind) == Placement::kV ? 2 : 1;
    for (int p = 1; p <= 8; ++p)
      for (int m : {1, 2, 3, 4, 5, 7, 8, 12, 16, 24})
        for (int v = v_min; v <= v_max; ++v) {
          if (!torch_accepts(kind, p, m)) {
            EXPECT_THROW(make_schedule(kind, p, m, v), ScheduleError) << kind_name(kind) << " p=" << p << " m=" << m;
            ++refused;
            continue;
          }
          const Schedule s = make_schedule(kind, p, m, v);
          const CheckResult r = check(s);
          ASSERT_TRUE(r.ok) << s.describe() << ": " << r.error;
          for (int rank = 0; rank < p; ++rank) {
            int forwards = 0;
            for (const Action& a : s.programs[rank])
              for (const Action& part : parts(a)) forwards += part.type == ActionType::kForward;
            EXPECT_EQ(forwards, m * v) << s.describe() << " rank " << rank;
          }
          ++checked;
        }
  }
  // gpipe, 1f1b, zb_h1: v = 1; interleaved, looped_bfs, interleaved_zb: v =
  // 1..4; zbv, dualpipev: v = 2. 80 shapes of (p, m) each.
  EXPECT_EQ(checked + refused, 3 * 80 + 3 * 80 * 4 + 2 * 80);
  EXPECT_GT(refused, 0);
}

// torch's newer kinds over every m up to 3p+2 (p 1..8): the checker proves
// each shape the rules accept (make_schedule runs it, and again here).
TEST(Builders, NewKindsAreValidForEveryMicrobatchCount) {
  for (ScheduleKind kind :
       {ScheduleKind::kInterleavedZeroBubble, ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV})
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 3 * p + 2; ++m) {
        if (!torch_accepts(kind, p, m)) continue;
        const CheckResult r = check(make_schedule(kind, p, m, 2));
        ASSERT_TRUE(r.ok) << kind_name(kind) << " p=" << p << " m=" << m << ": " << r.error;
      }
}

// Every interleaved shape up to m = 48 (builders.cpp: rounds of >= p
// microbatches make any m work, including m % p != 0, which Megatron refuses).
TEST(Builders, InterleavedTakesAnyMicrobatchCount) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 2; v <= 3; ++v)
      for (int m = 1; m <= 48; ++m) {
        const CheckResult r = check(make_schedule(ScheduleKind::kInterleaved1F1B, p, m, v));
        ASSERT_TRUE(r.ok) << "p=" << p << " m=" << m << " v=" << v << ": " << r.error;
      }
}

}  // namespace
}  // namespace distlab::pipeline
