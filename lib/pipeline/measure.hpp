// A real run's timeline read back from its trace: the same numbers the
// simulator predicts (makespan, idle fraction per rank), and the measured
// cost of each action, to feed the simulator for a like-for-like comparison.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/simulator.hpp"
#include "trace/event.hpp"

namespace distlab::pipeline {

struct Measured {
  double makespan_s = 0;            // first non-receive action's begin to last action's end, all ranks
  std::vector<double> busy_s;       // per rank: seconds in F, B, I, W
  std::vector<double> idle_fraction;
  double bubble = 0;                // mean idle fraction over ranks
  ActionCosts costs;                // per stage: mean seconds of F, B, I, W
  // per stage: the most microbatches whose activations were held at once,
  // counted as the simulator counts them (from an F's begin to the end of its
  // B, or of its W when the backward is split).
  std::vector<int> peak_activations;
};

// The events the executor recorded for `schedule` (lanes "stage s", arg
// "schedule"), in step `step` (-1: every step; one step is what the
// simulator models). Times of one clock: threads of one process, or a trace
// merged by distlab-trace.
Measured measure(const std::vector<trace::Event>& events, const Schedule& schedule, int64_t step = -1);

}  // namespace distlab::pipeline
