// The simulator against the formulas: GPipe's and 1F1B's bubble
// (p-1)/(m+p-1), their activation peaks, ZB-H1's (p-1)(F+B-W), Megatron's
// interleaved bubble, and a timeline worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline/measure.hpp"
#include "pipeline/simulator.hpp"

namespace distlab::pipeline {
namespace {

ActionCosts costs(double f, double b) {
  ActionCosts c;
  c.uniform.forward = f;
  c.uniform.backward = b;
  return c;
}

TEST(Simulator, GPipeAndOneFOneBBubbleIsTheFormula) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B})
    for (int p = 1; p <= 8; ++p)
      for (int m : {1, 2, 3, 4, 8, 16})
        for (double b : {1.0, 2.0}) {
          const Simulation sim = simulate(make_schedule(kind, p, m), costs(1.0, b));
          const std::string what = std::string(kind_name(kind)) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
          EXPECT_NEAR(sim.makespan, (m + p - 1) * (1.0 + b), 1e-9) << what;
          EXPECT_NEAR(sim.bubble, double(p - 1) / (m + p - 1), 1e-12) << what;
          for (int r = 0; r < p; ++r) EXPECT_NEAR(sim.idle_fraction[r], gpipe_bubble(p, m), 1e-12) << what;
        }
}

TEST(Simulator, PeakActivationsGPipeHoldsMOneFOneBHoldsPMinusS) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {1, 2, 3, 5, 8, 16}) {
      const Simulation g = simulate(make_schedule(ScheduleKind::kGPipe, p, m), costs(1, 2));
      const Simulation o = simulate(make_schedule(ScheduleKind::k1F1B, p, m), costs(1, 2));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(g.peak_activations[s], m) << "gpipe p=" << p << " m=" << m << " stage " << s;
        EXPECT_EQ(o.peak_activations[s], std::min(p - s, m)) << "1f1b p=" << p << " m=" << m << " stage " << s;
        EXPECT_EQ(o.activations[s].back().second, 0);  // everything released at the end
      }
    }
}

// Qi et al. Table 2: with per-stage times F, B (input grad), W (weight
// grad), 1F1B idles (p-1)(F+B+W) and ZB-H1 (p-1)(F+B-W); both peak at p
// microbatches. ZB-H1 is built for F = B = W, the paper's setting.
TEST(Simulator, ZeroBubbleH1BubbleIsThePapersFormula) {
  for (int p = 1; p <= 8; ++p)
    for (int m : {p, p + 1, 2 * p, 3 * p + 1, 24}) {
      ActionCosts c;
      c.uniform = {/*forward=*/1, /*backward=*/2, /*backward_input=*/1, /*backward_weight=*/1};
      const Simulation zb = simulate(make_schedule(ScheduleKind::kZeroBubbleH1, p, m), c);
      const Simulation ofob = simulate(make_schedule(ScheduleKind::k1F1B, p, m), c);
      const std::string what = "p=" + std::to_string(p) + " m=" + std::to_string(m);
      EXPECT_NEAR(zb.makespan - 3.0 * m, (p - 1) * (1.0 + 1.0 - 1.0), 1e-9) << what;
      EXPECT_NEAR(ofob.makespan - 3.0 * m, (p - 1) * (1.0 + 1.0 + 1.0), 1e-9) << what;
      EXPECT_EQ(zb.peak_activations[0], p) << what;
      for (int s = 0; s < p; ++s) EXPECT_LE(zb.peak_activations[s], p) << what << " stage " << s;
    }
}

// Megatron-LM 2021: with v chunks per rank the bubble shrinks v times:
// idle time (p-1)(F+B) / v, F and B being one rank's whole share of the
// model, when m is a multiple of p.
TEST(Simulator, InterleavedBubbleShrinksWithChunks) {
  for (int p : {2, 4})
    for (int v : {1, 2, 4})
      for (int m : {p, 2 * p, 4 * p}) {
        const Simulation sim = simulate(make_schedule(ScheduleKind::kInterleaved1F1B, p, m, v), costs(1.0 / v, 2.0 / v));
        const double ideal = m * 3.0;
        EXPECT_NEAR(sim.makespan - ideal, (p - 1) * 3.0 / v, 1e-9) << "p=" << p << " v=" << v << " m=" << m;
      }
}

// Two stages, one microbatch, messages of 0.5 s: F0 [0,1), message lands at
// 1.5, stage 1 F [1.5,2.5) B [2.5,4.5), gradient lands at 5, B [5,7).
TEST(Simulator, MessagesDelayTheReceiverTimelineByHand) {
  ActionCosts c = costs(1, 2);
  c.message_s = 0.5;
  const Simulation sim = simulate(make_schedule(ScheduleKind::kGPipe, 2, 1), c);
  EXPECT_DOUBLE_EQ(sim.makespan, 7.0);
  EXPECT_DOUBLE_EQ(sim.busy[0], 3.0);
  EXPECT_DOUBLE_EQ(sim.idle_fraction[1], 4.0 / 7.0);
  int found = 0;
  for (const trace::Event& e : sim.events) {
    if (e.name == "1F0") {
      EXPECT_EQ(e.begin_us, 1500000);
      EXPECT_EQ(e.end_us, 2500000);
      EXPECT_EQ(e.lane, "stage 1");
      EXPECT_EQ(e.arg("microbatch"), "0");
      EXPECT_EQ(e.arg("schedule"), "gpipe");
      ++found;
    }
    if (e.name == "0RECV_B0") {
      EXPECT_EQ(e.begin_us, 1000000);  // waits from the end of 0F0
      EXPECT_EQ(e.end_us, 5000000);
      EXPECT_EQ(e.peer, 1);
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
  EXPECT_EQ(sim.events.size(), 8u);
}

TEST(Simulator, ComputeNeverOverlapsOnARank) {
  for (ScheduleKind kind : all_kinds()) {
    const Schedule s = make_schedule(kind, 3, 6, stages_per_rank_for(kind, 2));
    const Simulation sim = simulate(s, costs(1, 2));
    std::vector<int64_t> last_end(3, 0);
    for (const trace::Event& e : sim.events) {
      if (e.lane == trace::kLaneComm) continue;
      EXPECT_GE(e.begin_us, last_end[e.rank]) << kind_name(kind) << " " << e.name;
      last_end[e.rank] = e.end_us;
    }
  }
}

// Ranks that share cores (more rank threads than processors, several ranks
// on one GPU): at most `cores` compute actions at once, first come first
// served. One core runs the whole step's work back to back, since some rank
// can always move; with a core per rank the timeline is the unshared one.
TEST(Simulator, RanksSharingCoresWaitForAFreeOne) {
  for (ScheduleKind kind : all_kinds())
    for (int p : {2, 3, 4})
      for (int m : {2, 4, 8}) {
        if (kind == ScheduleKind::kDualPipeV && m < 2 * p) continue;  // it needs m >= 2p
        const Schedule s = make_schedule(kind, p, m, stages_per_rank_for(kind, 2));
        ActionCosts c = costs(1, 2);
        c.uniform.backward_input = c.uniform.backward_weight = 1;
        const std::string what = std::string(kind_name(kind)) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        double work = 0;
        for (const auto& program : s.programs)
          for (const Action& a : program) work += is_compute(a.type) ? c.seconds(a) : 0.0;

        const Simulation one = simulate(s, c, 1);
        EXPECT_NEAR(one.makespan, work, 1e-9) << what;
        EXPECT_NEAR(one.bubble, 1.0 - 1.0 / p, 1e-12) << what;

        const Simulation own = simulate(s, c), enough = simulate(s, c, p);
        ASSERT_EQ(own.events.size(), enough.events.size()) << what;
        for (size_t k = 0; k < own.events.size(); ++k) {
          EXPECT_EQ(own.events[k].begin_us, enough.events[k].begin_us) << what << " " << own.events[k].name;
          EXPECT_EQ(own.events[k].end_us, enough.events[k].end_us) << what << " " << own.events[k].name;
        }

        const Simulation two = simulate(s, c, 2);
        EXPECT_GE(two.bubble, 1.0 - 2.0 / p - 1e-12) << what;
        EXPECT_GE(two.makespan, own.makespan - 1e-9) << what;
        std::vector<std::pair<int64_t, int>> edges;  // (time, +1 begin / -1 end), ends first at a tie
        for (const trace::Event& e : two.events)
          if (e.lane != trace::kLaneComm) edges.push_back({e.begin_us, +1}), edges.push_back({e.end_us, -1});
        std::sort(edges.begin(), edges.end());
        int running = 0;
        for (const auto& [t, d] : edges) {
          running += d;
          EXPECT_LE(running, 2) << what << " at " << t << " us";
        }
      }
}

// GPipe, 2 ranks, 2 microbatches, one core: at t = 1 rank 0's second forward
// and rank 1's first ask for the core together; rank 0 (the lower) gets it,
// so rank 1 starts at 2, not 1.
TEST(Simulator, SharedCoreGoesFirstComeFirstServedByHand) {
  const Simulation sim = simulate(make_schedule(ScheduleKind::kGPipe, 2, 2), costs(1, 2), 1);
  int found = 0;
  for (const trace::Event& e : sim.events) {
    if (e.name == "0F1") {
      EXPECT_EQ(e.begin_us, 1000000);
      ++found;
    }
    if (e.name == "1F0") {
      EXPECT_EQ(e.begin_us, 2000000);
      EXPECT_EQ(e.end_us, 3000000);
      ++found;
    }
    if (e.name == "1F1") {
      EXPECT_EQ(e.begin_us, 3000000);
      ++found;
    }
  }
  EXPECT_EQ(found, 3);
  EXPECT_DOUBLE_EQ(sim.makespan, 12.0);
}

// measure() reads a timeline back: fed the simulator's own events it must
// find the simulator's bubble, action costs and activation peaks.
TEST(Measure, ReadsTheSimulatorsTimelineBack) {
  ActionCosts c;
  c.uniform = {/*forward=*/1e-3, /*backward=*/3e-3, /*backward_input=*/2e-3, /*backward_weight=*/1e-3};
  for (ScheduleKind kind : all_kinds())
    for (int p : {2, 3, 4})
      for (int m : {1, 3, 4, 8}) {
        if (kind == ScheduleKind::kDualPipeV && m < 2 * p) continue;  // it needs m >= 2p
        if (kind == ScheduleKind::kInterleavedZeroBubble && m % std::max(1, m / p) != 0) continue;  // torch's rule
        const Schedule schedule = make_schedule(kind, p, m, stages_per_rank_for(kind, 2));
        const Simulation sim = simulate(schedule, c);
        const Measured got = measure(sim.events, schedule);
        const std::string what = schedule.describe();
        EXPECT_NEAR(got.makespan_s, sim.makespan, 1e-6) << what;
        EXPECT_NEAR(got.bubble, sim.bubble, 1e-6) << what;
        EXPECT_EQ(got.peak_activations, sim.peak_activations) << what;
        for (int s = 0; s < schedule.num_stages(); ++s) {
          // What the schedule runs on stage s: B (also inside a compound), I and W.
          bool full = false, split = false;
          for (const auto& program : schedule.programs)
            for (const Action& a : program)
              for (const Action& part : parts(a))
                if (part.stage == s) {
                  full |= part.type == ActionType::kBackward;
                  split |= part.type == ActionType::kBackwardWeight;
                }
          EXPECT_TRUE(full || split) << what << " stage " << s;
          EXPECT_NEAR(got.costs.of(s).forward, 1e-3, 1e-9) << what;
          EXPECT_NEAR(got.costs.of(s).backward, full ? 3e-3 : 0.0, 1e-9) << what << " stage " << s;
          EXPECT_NEAR(got.costs.of(s).backward_weight, split ? 1e-3 : 0.0, 1e-9) << what << " stage " << s;
        }
      }
}

// Steps are not fenced: a rank done with step k posts step k+1's first
// receive while rank 0 still finishes step k. That early wait must not
// stretch step k+1's window: the step starts with rank 0's first forward,
// as the simulator's does.
TEST(Measure, AReceivePostedBeforeTheStepStartsIsNotPartOfIt) {
  ActionCosts c;
  c.uniform = {/*forward=*/1e-3, /*backward=*/2e-3, 0, 0};
  for (int m : {1, 4}) {
    const Schedule schedule = make_schedule(ScheduleKind::kGPipe, 2, m, 1);
    const Simulation sim = simulate(schedule, c);
    std::vector<trace::Event> events = sim.events;
    // The executor records receives on the stage lane, as the action they are.
    trace::Event early;
    early.rank = 1;
    early.lane = "stage 1";
    early.category = "recv";
    early.name = "1RECV_F0";
    early.begin_us = -50000;  // posted 50 ms before rank 0's F0
    early.end_us = 1000;      // F0 takes 1 ms, then its activation arrives
    early.args = {{"schedule", kind_name(schedule.kind)}, {"stage", "1"}, {"microbatch", "0"}};
    events.push_back(early);
    const Measured got = measure(events, schedule);
    EXPECT_NEAR(got.makespan_s, sim.makespan, 1e-6) << "m = " << m;
    EXPECT_NEAR(got.bubble, sim.bubble, 1e-6) << "m = " << m;
  }
}

}  // namespace
}  // namespace distlab::pipeline
