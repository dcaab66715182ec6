// What a schedule costs, without running a model: a schedule plus the time
// of each action -> a timeline in the trace's own event form, the makespan,
// the bubble (idle fraction) of each rank, and how many microbatches' worth
// of activations each stage holds over time.
//
// A stage holds a microbatch's activations from the start of its F until the
// end of its backward (B, or W when the backward is split: W still reads the
// stage's saved input; I when the stage does not split it). Messages cost `message_s` each (for instance the
// alpha-beta model of collectives/cost_model.hpp: alpha + bytes * beta);
// sends do not occupy the rank, receives make it wait.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/schedule.hpp"
#include "trace/event.hpp"

namespace distlab::pipeline {

// Seconds per action on one stage.
struct StageCosts {
  double forward = 1.0;
  double backward = 2.0;         // full backward, B = I + W
  double backward_input = 1.0;   // I
  double backward_weight = 1.0;  // W
  // false: the stage does not split its backward (a recomputed layer's
  // weights need the whole of it: StageModule::splits_backward), so I runs
  // all of B and frees the microbatch there, W nothing. Its costs are the
  // caller's to set (I = B, W = 0).
  bool splits_backward = true;
};

struct ActionCosts {
  StageCosts uniform;              // every stage, unless per_stage is given
  std::vector<StageCosts> per_stage;  // empty, or one per stage
  double message_s = 0.0;          // each SEND's latency
  // How much of an OVERLAP_F_B's shorter half its longer half hides: the
  // compound takes F + B - overlap * min(F, B) (DualPipe's "F&B"). 0: one
  // after the other, as DistLab's executor runs it on CPU ranks; 1: the
  // shorter half hidden entirely (separate streams on a GPU, at best).
  double overlap = 0.0;

  const StageCosts& of(int stage) const {
    return per_stage.empty() ? uniform : per_stage.at(static_cast<size_t>(stage));
  }
  // The seconds `action` takes under these costs (a SEND: its latency; RECV: 0).
  double seconds(const Action& action) const;
  // The seconds of an overlapped forward of `forward_stage` and full backward of `backward_stage`.
  double overlapped(int forward_stage, int backward_stage) const;
};

struct Simulation {
  double makespan = 0;              // seconds from the first action to the last
  std::vector<double> busy;         // per rank: seconds of compute
  std::vector<double> idle_fraction;  // per rank: 1 - busy / makespan
  double bubble = 0;                // mean idle fraction over ranks
  std::vector<int> peak_activations;  // per stage
  // per stage: (time, microbatches held from then on), one point per change
  std::vector<std::vector<std::pair<double, int>>> activations;
  // compute on lane "stage s"; sends (in flight) and receives (waiting) on
  // lane "comm" of their rank. Times in microseconds from 0. An OVERLAP_F_B
  // is two events, its F then its B, sharing its time in proportion to F
  // and B (as the executor records it: one half after the other), each with
  // the arg "compound" naming the whole action ("(0F3;3B1)OVERLAP_F_B").
  std::vector<trace::Event> events;
};

// Throws ScheduleError when the schedule deadlocks (run check() for why).
// cores > 0: the ranks share that many processors (replay.hpp): a ready
// action waits for a free one, and the wait counts as idle.
Simulation simulate(const Schedule& schedule, const ActionCosts& costs, int cores = 0);

// The textbook bubble of GPipe and 1F1B, (p-1)/(m+p-1) of the step.
inline double gpipe_bubble(int p, int m) { return double(p - 1) / double(m + p - 1); }

// Lane name of a stage in traces: "stage 2".
std::string stage_lane(int stage);
// The trace category of an action: fwd, bwd, bwd_input, bwd_weight, send, recv.
const char* action_category(ActionType type);

}  // namespace distlab::pipeline
