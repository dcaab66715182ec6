// ZB-H1 and interleaved zero bubble (Qi et al., "Zero Bubble Pipeline
// Parallelism", arXiv 2401.10241). The V-shaped zero-bubble schedules are in
// v_schedules.cpp.
//
// The backward is split in two: I, the gradient of the stage's input (what
// the previous stage waits for), and W, the gradient of its weights (which
// nobody waits for). ZB-H1 keeps 1F1B's order of forwards and input
// gradients, so every I travels back as early as in 1F1B, and moves each W
// into a slot where 1F1B would sit idle, never holding more than p
// microbatches in flight on a stage (from F until W; 1F1B's peak on stage
// 0). With F = I = W its bubble is (p-1)(F+I-W) = (p-1) F, a third of
// 1F1B's (p-1)(F+I+W) (paper, Table 2, which writes B for what DistLab
// calls I; here, as in closed_form.hpp, B is the whole backward I + W).
//
// The paper draws the schedule by hand; here it is built by playing the
// pipeline in unit time steps (F = I = W = 1, messages free). Each stage
// follows 1F1B's order for F and I; when its next F or I cannot run (input
// or gradient not there yet, or an F would put p + 1 microbatches in
// flight), it runs its oldest pending W instead, if any. The order this
// produces is the schedule; tests/pipeline checks its bubble against the
// formula.
#include <algorithm>

#include "pipeline/next_microbatch.hpp"
#include "pipeline/schedule.hpp"

namespace distlab::pipeline {

std::vector<std::vector<Action>> zero_bubble_h1_order(int p, int m) {
  constexpr int kNever = 1 << 30;
  const auto one_f_one_b = one_f_one_b_order(p, m);
  std::vector<std::vector<Action>> order(p);
  // finish times (end of the unit step) of F and I, per stage and microbatch
  std::vector<std::vector<int>> f_done(p, std::vector<int>(m, kNever)), i_done = f_done;
  std::vector<size_t> next(p, 0);  // position in the stage's 1F1B order
  std::vector<int> forwards(p, 0), weights(p, 0), inputs(p, 0);
  int left = 3 * m * p;
  for (int t = 0; left > 0; ++t) {
    for (int s = 0; s < p; ++s) {
      bool ran_fixed = false;
      if (next[s] < one_f_one_b[s].size()) {
        const Action a = one_f_one_b[s][next[s]];
        const int i = a.microbatch;
        if (a.type == ActionType::kForward) {
          const bool input = s == 0 || f_done[s - 1][i] <= t;
          if (input && forwards[s] - weights[s] < p) {
            order[s].push_back(a);
            f_done[s][i] = t + 1;
            ++forwards[s];
            ran_fixed = true;
          }
        } else {
          const bool grad = s == p - 1 ? f_done[s][i] <= t : i_done[s + 1][i] <= t;
          if (grad) {
            order[s].push_back({ActionType::kBackwardInput, s, i});
            i_done[s][i] = t + 1;
            ++inputs[s];
            ran_fixed = true;
          }
        }
      }
      if (ran_fixed) {
        ++next[s];
        --left;
      } else if (weights[s] < inputs[s] && i_done[s][weights[s]] <= t) {
        order[s].push_back({ActionType::kBackwardWeight, s, weights[s]});  // fill the gap
        ++weights[s];
        --left;
      }
    }
  }
  return order;
}

// Interleaved zero bubble (torch's ScheduleInterleavedZeroBubble in
// torch/distributed/pipelining/schedules.py, the paper's ZB1P with several
// stages per rank). Looped placement as Interleaved 1F1B: rank r holds
// stages r, r + p, ..., r + (v-1) p. The order is Interleaved 1F1B's with
// the backward split:
//
//   warm-up  (v-1) g + (p-1-r) forwards (g = m / rounds microbatches per
//            round, rounds = max(1, m / p); m % rounds == 0, make_schedule
//            checks): one hop fewer per rank than Interleaved 1F1B's 2 (p-1-r),
//            since an I returns sooner than a B;
//   steady   one F, one I; from the (r+1)-th pair on also one W, the
//            oldest waiting: rank r's first r steady slots would have
//            waited for a gradient in 1F1B, and the Ws fill them later;
//   cool-down the remaining Is, each with a W while any wait, then the
//            rest of the Ws.
//
// Forwards go round by round through the chunks (g microbatches through
// chunk 0, g through chunk 1, ...), backwards through the chunks in reverse.
std::vector<std::vector<Action>> interleaved_zero_bubble_order(int p, int m, int v) {
  const int rounds = std::max(1, m / p), g = m / rounds;
  const int total = m * v;  // forwards, and as many Is and Ws, per rank
  std::vector<std::vector<Action>> order(p);
  for (int r = 0; r < p; ++r) {
    const int warmup = std::min(total, (v - 1) * g + (p - 1 - r));
    // The stage of the k-th forward and of the k-th backward of this rank.
    auto forward_stage = [&](int k) { return ((k / g) % v) * p + r; };
    auto backward_stage = [&](int k) { return (v - 1 - (k / g) % v) * p + r; };
    NextMicrobatch next;
    std::vector<int> backward_stages;  // stage of each I so far, in order
    size_t weights = 0;
    auto& ops = order[r];
    auto push = [&](ActionType type, int stage) { ops.push_back(next.take(type, stage)); };
    auto weight = [&]() { push(ActionType::kBackwardWeight, backward_stages[weights++]); };
    for (int k = 0; k < warmup; ++k) push(ActionType::kForward, forward_stage(k));
    for (int k = 0; k < total; ++k) {  // the k-th I; steady while forwards remain
      if (warmup + k < total) push(ActionType::kForward, forward_stage(warmup + k));
      backward_stages.push_back(backward_stage(k));
      push(ActionType::kBackwardInput, backward_stages.back());
      if (k >= r) weight();
    }
    while (weights < backward_stages.size()) weight();
  }
  return order;
}

}  // namespace distlab::pipeline
