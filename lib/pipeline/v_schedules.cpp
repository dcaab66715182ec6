// The V-shaped schedules. Each rank holds exactly two stages in a V
// (schedule.hpp): rank r holds stage r ("chunk 0", on the way down) and
// stage 2p-1-r ("chunk 1", on the way back up). Rank 0 reads the batch and
// computes the loss; at rank p-1 the activation turns around without a
// message.
//
// The orders are torch's (torch/distributed/pipelining/schedules.py), rank
// by rank; lower_communication adds the messages and make_schedule runs the
// checker on the result.
#include <algorithm>
#include <deque>

#include "pipeline/next_microbatch.hpp"
#include "pipeline/schedule.hpp"

namespace distlab::pipeline {

// ZBV (torch's ScheduleZBVZeroBubble; Qi et al., arXiv 2401.10241, section
// 6). The backward is split into I and W as in ZB-H1. p = 2, m = 4, every
// action one time unit, as simulate() plays it ("3I0": stage 3's input
// gradient of microbatch 0; rank 0 holds stages 0 and 3, rank 1 stages 1
// and 2):
//
//   time      0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15  16  17  18  19  20  21  22  23  24
//   rank 0  0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3   .
//   rank 1    . 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3
//
// From its first action to its last no rank waits: the zero bubble of the
// paper when F = I = W. What is left is the V's ramp, (p-1) units per rank.
//
// Warm-up on rank r: 2(p-r)-1 forwards of chunk 0; r pairs F chunk 1, F
// chunk 0; p-r triples F, I, W of chunk 1. Steady: F, I, W of chunk 0 then
// of chunk 1. Cool-down: r pairs of Is, p-r I + W of chunk 0, then every W
// left. torch builds it for max(2p-1, m) microbatches and drops the actions
// of microbatches >= m, so any m >= 1 is accepted; so does DistLab.
std::vector<std::vector<Action>> zbv_order(int p, int m) {
  const int n = std::max(2 * p - 1, m);
  std::vector<std::vector<Action>> order(p);
  for (int r = 0; r < p; ++r) {
    const int c0 = r, c1 = 2 * p - 1 - r;
    NextMicrobatch next;
    std::vector<Action> ops;
    auto add = [&](ActionType type, int stage) { ops.push_back(next.take(type, stage)); };
    const auto F = ActionType::kForward, I = ActionType::kBackwardInput, W = ActionType::kBackwardWeight;
    for (int k = 0; k < 2 * (p - r) - 1; ++k) add(F, c0);
    for (int k = 0; k < r; ++k) {
      add(F, c1);
      add(F, c0);
    }
    for (int k = 0; k < p - r; ++k) {
      add(F, c1);
      add(I, c1);
      add(W, c1);
    }
    while (next.peek(F, c1) < next.peek(F, c0) || next.peek(F, c0) < n) {  // steady
      if (next.peek(F, c0) < n) add(F, c0);
      add(I, c0);
      add(W, c0);
      add(F, c1);
      add(I, c1);
      add(W, c1);
    }
    for (int k = 0; k < r; ++k) {  // cool-down: Is first, their Ws after
      add(I, c0);
      add(I, c1);
    }
    for (int k = 0; k < p - r; ++k) {
      add(I, c0);
      add(W, c0);
    }
    while (next.peek(W, c1) < next.peek(I, c1)) add(W, c1);
    while (next.peek(W, c0) < next.peek(I, c0)) add(W, c0);
    for (const Action& a : ops)
      if (a.microbatch < m) order[r].push_back(a);  // the padding microbatches go
  }
  return order;
}

// DualPipeV (torch's ScheduleDualPipeV, after DeepSeek's DualPipe,
// arXiv 2412.19437 and github.com/deepseek-ai/DualPipe). Its steady state
// pairs a forward of one chunk with the full backward of the other in one
// OVERLAP_F_B action, so that on a GPU the backward's compute hides the
// forward's communication and vice versa. Rank r, chunks s0 = r, s1 =
// 2p-1-r, in eight steps:
//
//   1  2(p-r-1) forwards of s0
//   2  r+1 pairs F s0, F s1
//   3  p-r-1 triples I s1, a waiting W, F s1          (zero bubble)
//   4  m-2p+r+1 pairs (F s0 & B s1), (F s1 & B s0)    (the main step; on
//      rank p-1 the first F s0, B s1 run apart, which shortens the bubble)
//   5  p-r-1 pairs B s1, (F s1 & B s0)
//   6  r+1 pairs B s1, B s0, switching to I (W later) halfway
//   7  p-r-1 pairs: a waiting W, then B (or I) of s0
//   8  r+1 waiting Ws
//
// Step 4 needs m >= 2p (make_schedule refuses less, as torch does). Each
// action's microbatch is the next one not yet through that stage and kind;
// a B counts as an I and a W.
std::vector<std::vector<Action>> dualpipev_order(int p, int m) {
  std::vector<std::vector<Action>> order(p);
  for (int r = 0; r < p; ++r) {
    const int s0 = r, s1 = 2 * p - 1 - r;
    NextMicrobatch next;
    std::deque<Action> weights;  // Ws owed by the Is so far, oldest first
    auto& ops = order[r];
    auto take = [&](int stage, ActionType type) {
      const Action a = next.take(type, stage);
      if (type == ActionType::kBackwardInput) weights.push_back({ActionType::kBackwardWeight, stage, a.microbatch});
      return a;
    };
    auto add = [&](int stage, ActionType type) { ops.push_back(take(stage, type)); };
    auto add_overlap = [&](int forward_stage, int backward_stage) {
      const Action f = take(forward_stage, ActionType::kForward);
      ops.push_back(overlap_fb(f, take(backward_stage, ActionType::kBackward)));
    };
    auto add_waiting_weight = [&]() {
      if (weights.empty()) return;
      ops.push_back(weights.front());
      weights.pop_front();
    };
    for (int k = 0; k < 2 * (p - r - 1); ++k) add(s0, ActionType::kForward);  // 1
    for (int k = 0; k < r + 1; ++k) {                                         // 2
      add(s0, ActionType::kForward);
      add(s1, ActionType::kForward);
    }
    for (int k = 0; k < p - r - 1; ++k) {  // 3
      add(s1, ActionType::kBackwardInput);
      add_waiting_weight();
      add(s1, ActionType::kForward);
    }
    for (int k = 0; k < m - 2 * p + r + 1; ++k) {  // 4
      if (k == 0 && r == p - 1) {
        add(s0, ActionType::kForward);
        add(s1, ActionType::kBackward);
      } else {
        add_overlap(s0, s1);
      }
      add_overlap(s1, s0);
    }
    for (int k = 0; k < p - r - 1; ++k) {  // 5
      add(s1, ActionType::kBackward);
      add_overlap(s1, s0);
    }
    bool split = false;  // 6: the second half of these backwards leave their W for later
    for (int k = 0; k < r + 1; ++k) {
      if (k == (r + 1) / 2 && r % 2 == 1) split = true;
      add(s1, split ? ActionType::kBackwardInput : ActionType::kBackward);
      if (k == (r + 1) / 2 && r % 2 == 0) split = true;
      add(s0, split ? ActionType::kBackwardInput : ActionType::kBackward);
    }
    for (int k = 0; k < p - r - 1; ++k) {  // 7
      add_waiting_weight();
      add(s0, split ? ActionType::kBackwardInput : ActionType::kBackward);
    }
    for (int k = 0; k < r + 1; ++k) add_waiting_weight();  // 8
  }
  return order;
}

}  // namespace distlab::pipeline
