#include "pipeline/schedule_kinds.hpp"

#include <algorithm>
#include <stdexcept>

namespace distlab::pipeline {

namespace {

// torch's ScheduleInterleavedZeroBubble: rounds = max(1, m // p) rounds of
// m // rounds microbatches, and m % rounds == 0 ("Zero bubble requires the
// number of microbatches to be a multiple of the number of rounds").
void whole_rounds(const std::string& shape, int p, int m) {
  const int rounds = std::max(1, m / p);
  require_schedule(m % rounds == 0,
          shape + ": m must be a multiple of its number of rounds max(1, m / p) = " + std::to_string(rounds),
          "choose m = " + std::to_string(m - m % rounds) + " or another multiple of p (torch's rule)");
}

// torch's ScheduleDualPipeV: "DualPipeV requires at least as many
// microbatches as stages".
void a_microbatch_per_stage(const std::string& shape, int p, int m) {
  require_schedule(m >= 2 * p,
          shape + ": DualPipeV needs at least as many microbatches as stages (m >= 2p = " + std::to_string(2 * p) + ")",
          "choose m >= " + std::to_string(2 * p));
}

bool any_m(int, int) { return true; }

}  // namespace

const std::vector<KindInfo>& kind_table() {
  static const std::vector<KindInfo> table = {
      {ScheduleKind::kGPipe, "gpipe", "GPipe", {}, Placement::kLoop, StagesPerRank::kOne,
       [](int p, int m, int) { return gpipe_order(p, m); }, nullptr, false,
       [](const BubbleTerms& t) { return t.F + t.B; }, "(p-1)(F+B)", "any m", any_m},
      {ScheduleKind::k1F1B, "1f1b", "1F1B", {}, Placement::kLoop, StagesPerRank::kOne,
       [](int p, int m, int) { return one_f_one_b_order(p, m); }, nullptr, false,
       [](const BubbleTerms& t) { return t.F + t.B; }, "(p-1)(F+B)", "any m", any_m},
      // Megatron-LM 2021 section 2.2: (1/v)(p-1) of one rank's whole share.
      {ScheduleKind::kInterleaved1F1B, "interleaved", "Interleaved 1F1B", {"interleaved_1f1b", "interleaved1f1b"},
       Placement::kLoop, StagesPerRank::kAny, interleaved_order, nullptr, true,
       [](const BubbleTerms& t) { return t.F + t.B; }, "(p-1)(F+B) per chunk = (1/v)(p-1)(F+B) per rank",
       "m a multiple of p", [](int p, int m) { return m % p == 0; }},
      {ScheduleKind::kLoopedBFS, "looped_bfs", "LoopedBFS", {"loopedbfs"}, Placement::kLoop, StagesPerRank::kAny,
       looped_bfs_order, nullptr, false, nullptr, "", "", [](int, int) { return false; }},
      // The DualPipe README's ZB1P (the paper's ZB-H1, (p-1)(F+I-W)).
      {ScheduleKind::kZeroBubbleH1, "zb_h1", "ZB-H1", {"zbh1", "zero_bubble"}, Placement::kLoop, StagesPerRank::kOne,
       [](int p, int m, int) { return zero_bubble_h1_order(p, m); }, nullptr, false,
       [](const BubbleTerms& t) { return t.F + t.B - 2 * t.W; }, "(p-1)(F+B-2W)", "F = I = W, m >= p",
       [](int p, int m) { return m >= p; }},
      {ScheduleKind::kInterleavedZeroBubble, "interleaved_zb", "Interleaved ZB",
       {"interleavedzerobubble", "interleaved_zero_bubble", "interleavedzb"}, Placement::kLoop, StagesPerRank::kAny,
       interleaved_zero_bubble_order, whole_rounds, true, [](const BubbleTerms& t) { return t.F + t.B - 2 * t.W; },
       "(p-1)(F+B-2W) per chunk = 1/v of ZB-H1's per rank", "W <= F, W <= I, m >= p",
       [](int p, int m) { return m >= p; }},
      // closed_form.hpp says why "zero" is (p-1)F here.
      {ScheduleKind::kZeroBubbleV, "zbv", "ZBV", {"zbvzerobubble", "zb_v"}, Placement::kV, StagesPerRank::kTwo,
       [](int p, int m, int) { return zbv_order(p, m); }, nullptr, true, [](const BubbleTerms& t) { return t.F; },
       "(p-1)F (the paper's zero inside each rank's run, plus the ramp)", "F = I = W, m >= 2p-1",
       [](int p, int m) { return m >= 2 * p - 1; }},
      // The DualPipe README's (PP/2-1)(F&B+B-3W), PP = 2p stages.
      {ScheduleKind::kDualPipeV, "dualpipev", "DualPipeV", {"dualpipe_v"}, Placement::kV, StagesPerRank::kTwo,
       [](int p, int m, int) { return dualpipev_order(p, m); }, a_microbatch_per_stage, true,
       [](const BubbleTerms& t) { return t.FB + t.B - 3 * t.W; }, "(PP/2-1)(F&B+B-3W), PP = 2p stages",
       "F = I = W, m >= 2p", any_m},
  };
  return table;
}

void require_schedule(bool ok, const std::string& what, const std::string& hint) {
  if (!ok) throw ScheduleError(what + "; " + hint);
}

const KindInfo& kind_info(ScheduleKind kind) {
  const auto& table = kind_table();
  const auto it = std::find_if(table.begin(), table.end(), [&](const KindInfo& k) { return k.kind == kind; });
  if (it == table.end()) throw std::logic_error("pipeline: a schedule kind with no row in kind_table()");
  return *it;
}

}  // namespace distlab::pipeline
