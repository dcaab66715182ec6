// The simulator against each schedule's closed-form bubble, in exactly the
// cases where the papers' formula is exact (closed_form.hpp), the formula
// written out here again: idle seconds per rank = makespan - own compute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "pipeline/closed_form.hpp"
#include "pipeline/simulator.hpp"

namespace distlab::pipeline {
namespace {

ActionCosts split_costs(double f, double i, double w, double overlap = 0) {
  ActionCosts c;
  c.uniform = {/*forward=*/f, /*backward=*/i + w, /*backward_input=*/i, /*backward_weight=*/w};
  c.overlap = overlap;
  return c;
}

// The most idle rank's idle seconds.
double max_idle(const Simulation& sim) {
  double idle = 0;
  for (double busy : sim.busy) idle = std::max(idle, sim.makespan - busy);
  return idle;
}

// Simulated idle == the formula == closed_form(); the step's mean idle
// fraction == closed_form_bubble().
void expect_closed_form(const Schedule& s, const ActionCosts& c, double formula, const std::string& what) {
  const Simulation sim = simulate(s, c);
  const auto form = closed_form(s.kind, s.ranks, c);
  ASSERT_TRUE(form.has_value()) << what;
  EXPECT_NEAR(form->idle_s, formula, 1e-9) << what;
  EXPECT_NEAR(max_idle(sim), formula, 1e-9) << what << " (" << form->formula << ")";
  EXPECT_NEAR(closed_form_bubble(s, c).value(), sim.bubble, 1e-9) << what;
}

std::string shape(const Schedule& s, const ActionCosts& c) {
  return s.describe() + " F=" + std::to_string(c.uniform.forward) + " I=" + std::to_string(c.uniform.backward_input) +
         " W=" + std::to_string(c.uniform.backward_weight) + " overlap=" + std::to_string(c.overlap);
}

// GPipe and 1F1B: (p-1)(F+B) for any m; Interleaved 1F1B: (p-1)(F+B) of
// one chunk, 1/v of a rank's share, for m a multiple of p.
TEST(ClosedForm, OneFOneBAndInterleavedAreMegatronsFormula) {
  for (int p = 1; p <= 8; ++p)
    for (double f : {1.0, 1.5}) {
      const ActionCosts c = split_costs(f, 1.0, 1.0);
      for (int m : {1, 3, p, 2 * p + 1}) {
        expect_closed_form(make_schedule(ScheduleKind::kGPipe, p, m), c, (p - 1) * (f + 2.0), "gpipe");
        expect_closed_form(make_schedule(ScheduleKind::k1F1B, p, m), c, (p - 1) * (f + 2.0), "1f1b");
      }
      for (int v : {2, 3})
        for (int m : {p, 2 * p, 3 * p}) {
          const Schedule s = make_schedule(ScheduleKind::kInterleaved1F1B, p, m, v);
          expect_closed_form(s, c, (p - 1) * (f + 2.0), shape(s, c));
        }
    }
  EXPECT_FALSE(closed_form(ScheduleKind::kLoopedBFS, 4, split_costs(1, 1, 1)).has_value());
}

// ZB-H1: (p-1)(F+B-2W), B = I + W, at F = I = W (what it is built for), m >= p.
TEST(ClosedForm, ZeroBubbleH1IsZB1P) {
  for (int p = 1; p <= 8; ++p)
    for (double unit : {1.0, 0.25})
      for (int m : {p, p + 1, 3 * p}) {
        const ActionCosts c = split_costs(unit, unit, unit);
        const Schedule s = make_schedule(ScheduleKind::kZeroBubbleH1, p, m);
        expect_closed_form(s, c, (p - 1) * (unit + 2 * unit - 2 * unit), shape(s, c));
      }
}

// Interleaved zero bubble: ZB1P's (p-1)(F+B-2W) with one chunk's times, for
// every v, wherever W fits in the gaps (W <= F, W <= I), m >= p and m
// accepted (a multiple of its rounds).
TEST(ClosedForm, InterleavedZeroBubbleIsZB1PPerChunk) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m : {p, p + 1, 2 * p, 3 * p})
        for (const ActionCosts& c : {split_costs(1, 1, 1), split_costs(2, 1, 1), split_costs(1, 2, 1), split_costs(2, 3, 1)}) {
          if (m % std::max(1, m / p) != 0) continue;  // refused (torch's rule)
          const Schedule s = make_schedule(ScheduleKind::kInterleavedZeroBubble, p, m, v);
          const StageCosts& u = c.uniform;
          expect_closed_form(s, c, (p - 1) * (u.forward + u.backward - 2 * u.backward_weight), shape(s, c));
        }
}

// ZBV at F = I = W, m >= 2p-1: no rank waits between its first action and
// its last (the paper's zero bubble), so each rank's idle in the step is
// only where its run starts and ends: rank r starts after r forwards (the
// first microbatch reaching it) and in all the idle is (p-1)F.
TEST(ClosedForm, ZbvIsZeroInsideEachRanksRun) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {2 * p - 1, 2 * p, 3 * p + 1})
      for (double unit : {1.0, 0.5}) {
        const ActionCosts c = split_costs(unit, unit, unit);
        const Schedule s = make_schedule(ScheduleKind::kZeroBubbleV, p, m, 2);
        const std::string what = shape(s, c);
        expect_closed_form(s, c, (p - 1) * unit, what);
        const Simulation sim = simulate(s, c);
        std::vector<int64_t> first(p, -1), last_end(p, 0);
        for (const trace::Event& e : sim.events) {
          if (e.lane == trace::kLaneComm) continue;
          if (first[e.rank] < 0) first[e.rank] = e.begin_us;
          EXPECT_TRUE(last_end[e.rank] == 0 || e.begin_us == last_end[e.rank])
              << what << ": rank " << e.rank << " waits before " << e.name;
          last_end[e.rank] = e.end_us;
        }
        for (int r = 0; r < p; ++r) EXPECT_EQ(first[r], std::llround(r * unit * 1e6)) << what << " rank " << r;
      }
}

// DualPipeV: the DualPipe README's (PP/2-1)(F&B+B-3W) with PP = 2p stages,
// F&B = F + B - overlap min(F, B), for the most idle rank, at F = I = W, m
// >= 2p; overlap 0 is how DistLab's CPU executor runs a compound.
TEST(ClosedForm, DualPipeVIsTheDualPipeReadmesFormula) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {2 * p, 2 * p + 1, 3 * p, 20})
      for (double overlap : {0.0, 0.5, 1.0}) {
        const ActionCosts c = split_costs(1, 1, 1, overlap);
        const Schedule s = make_schedule(ScheduleKind::kDualPipeV, p, m, 2);
        const double fb = 1.0 + 2.0 - overlap * 1.0;
        expect_closed_form(s, c, (2 * p / 2 - 1) * (fb + 2.0 - 3.0), shape(s, c));
      }
}

// Whether the simulated most idle rank is the closed form's at F = I = W.
bool formula_holds(ScheduleKind kind, int p, int m) {
  const ActionCosts c = split_costs(1, 1, 1);
  const Schedule s = make_schedule(kind, p, m, stages_per_rank_for(kind, 2));
  return std::abs(max_idle(simulate(s, c)) - closed_form(kind, p, c)->idle_s) <= 1e-9;
}

// Whether no rank waits between its first compute and its last, at F = I = W.
bool no_rank_waits_inside_its_run(const Schedule& s) {
  const Simulation sim = simulate(s, split_costs(1, 1, 1));
  std::vector<int64_t> last_end(static_cast<size_t>(s.ranks), -1);
  for (const trace::Event& e : sim.events) {
    if (e.lane == trace::kLaneComm) continue;
    int64_t& end = last_end[static_cast<size_t>(e.rank)];
    if (end >= 0 && e.begin_us != end) return false;
    end = e.end_us;
  }
  return true;
}

// exact_for_shape() against the simulator at F = I = W, every accepted m
// up to 3p+1: where it says the formula holds, it does.
TEST(ClosedForm, ExactForShapeOnlyNamesShapesWhereTheFormulaHolds) {
  const ActionCosts c = split_costs(1, 1, 1);
  int named = 0;
  for (ScheduleKind kind : all_kinds()) {
    if (!closed_form(kind, 2, c)) continue;  // LoopedBFS
    for (int p = 2; p <= 6; ++p)
      for (int m = 1; m <= 3 * p + 1; ++m) {
        if (kind == ScheduleKind::kDualPipeV && m < 2 * p) continue;                           // refused
        if (kind == ScheduleKind::kInterleavedZeroBubble && m % std::max(1, m / p) != 0) continue;  // refused
        if (!exact_for_shape(kind, p, m)) continue;
        ++named;
        EXPECT_TRUE(formula_holds(kind, p, m)) << kind_name(kind) << " p=" << p << " m=" << m;
      }
  }
  EXPECT_GT(named, 250);
}

// Where each formula stops, p = 2..6: exact on the boundary, off one
// microbatch outside it. ZB-H1 and interleaved zero bubble: m >= p, as
// exact_for_shape says. Interleaved 1F1B: from m = p on, not only at
// Megatron's multiples of p that exact_for_shape asks for (the builder's
// rounds of >= p microbatches keep the pipe full). ZBV: its idle is (p-1)F
// from m = floor(3p/2) on; exact_for_shape's 2p-1 is where no rank waits
// inside its run any more (the paper's zero bubble), which 2p-2 misses.
// DualPipeV refuses the m outside its boundary 2p; GPipe and 1F1B hold
// from m = 1.
TEST(ClosedForm, EachFormulaStopsJustOutsideItsBoundary) {
  for (int p = 2; p <= 6; ++p) {
    const std::string at_p = " p=" + std::to_string(p);
    for (ScheduleKind kind :
         {ScheduleKind::kZeroBubbleH1, ScheduleKind::kInterleavedZeroBubble, ScheduleKind::kInterleaved1F1B}) {
      const std::string what = kind_name(kind) + at_p;
      EXPECT_TRUE(formula_holds(kind, p, p)) << what << " m=p";
      EXPECT_TRUE(exact_for_shape(kind, p, p)) << what << " m=p";
      EXPECT_FALSE(formula_holds(kind, p, p - 1)) << what << " m=p-1";
      EXPECT_FALSE(exact_for_shape(kind, p, p - 1)) << what << " m=p-1";
    }
    const int zbv_first = 3 * p / 2;
    EXPECT_TRUE(formula_holds(ScheduleKind::kZeroBubbleV, p, zbv_first)) << "zbv" << at_p;
    EXPECT_FALSE(formula_holds(ScheduleKind::kZeroBubbleV, p, zbv_first - 1)) << "zbv" << at_p;
    EXPECT_TRUE(exact_for_shape(ScheduleKind::kZeroBubbleV, p, 2 * p - 1)) << "zbv" << at_p;
    EXPECT_TRUE(no_rank_waits_inside_its_run(make_schedule(ScheduleKind::kZeroBubbleV, p, 2 * p - 1, 2))) << at_p;
    EXPECT_FALSE(exact_for_shape(ScheduleKind::kZeroBubbleV, p, 2 * p - 2)) << "zbv" << at_p;
    EXPECT_FALSE(no_rank_waits_inside_its_run(make_schedule(ScheduleKind::kZeroBubbleV, p, 2 * p - 2, 2))) << at_p;

    EXPECT_TRUE(exact_for_shape(ScheduleKind::kDualPipeV, p, 2 * p)) << "dualpipev" << at_p;
    EXPECT_TRUE(formula_holds(ScheduleKind::kDualPipeV, p, 2 * p)) << "dualpipev" << at_p;
    EXPECT_THROW(make_schedule(ScheduleKind::kDualPipeV, p, 2 * p - 1, 2), ScheduleError) << at_p;
    for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
      EXPECT_TRUE(exact_for_shape(kind, p, 1)) << kind_name(kind) << at_p;
      EXPECT_TRUE(formula_holds(kind, p, 1)) << kind_name(kind) << at_p;
    }
  }
}

// The most microbatches' activations rank r holds at once over all its
// stages (each stage's count from the simulator, summed over time).
int rank_peak(const Schedule& s, const Simulation& sim, int r) {
  std::map<double, int> change;
  for (int stage = 0; stage < s.num_stages(); ++stage) {
    if (s.rank_of_stage(stage) != r) continue;
    int before = 0;
    for (const auto& [time, held] : sim.activations[stage]) change[time] += held - std::exchange(before, held);
  }
  int held = 0, peak = 0;
  for (const auto& [time, delta] : change) peak = std::max(peak, held += delta);
  return peak;
}

// Memory, in chunk-sized microbatches: ZBV holds 2p on every rank, p of a
// whole rank's share, 1F1B's peak on its first stage (the zero-bubble
// paper: ZB-V at 1F1B's memory); DualPipeV holds PP + 1 = 2p + 1 (the
// DualPipe README's "PP+1" activations per device).
TEST(ClosedForm, VSchedulesPeakActivationsAreThePapers) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {2 * p, 4 * p + 1}) {
      const ActionCosts c = split_costs(1, 1, 1);
      const Schedule zbv = make_schedule(ScheduleKind::kZeroBubbleV, p, m, 2);
      const Schedule dual = make_schedule(ScheduleKind::kDualPipeV, p, m, 2);
      const Simulation zbv_sim = simulate(zbv, c), dual_sim = simulate(dual, c);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(rank_peak(zbv, zbv_sim, r), 2 * p) << zbv.describe() << " rank " << r;
        EXPECT_EQ(rank_peak(dual, dual_sim, r), 2 * p + 1) << dual.describe() << " rank " << r;
      }
    }
}

}  // namespace
}  // namespace distlab::pipeline
