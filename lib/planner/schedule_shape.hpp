// How many microbatches' activations a schedule keeps on each stage over a
// step, from the pipeline simulator (pipeline/simulator.hpp) run once per
// (kind, P, v, m) with a backward twice a forward (I = W = F): what the
// memory prediction multiplies a microbatch's bytes by. Cached: the
// enumeration asks for the same few shapes thousands of times.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "pipeline/schedule.hpp"

namespace distlab::planner {

struct HeldMicrobatches {
  int ranks = 0;
  std::vector<int> rank_of_stage;
  // per stage: (time, microbatches held from then on)
  std::vector<std::vector<std::pair<double, int>>> timeline;
  // The peak over the step of sum over rank `rank`'s stages of held x bytes,
  // and the microbatches held then.
  std::pair<int64_t, int> peak(int rank, const std::vector<int64_t>& bytes_per_microbatch) const;
};

// Throws pipeline::ScheduleError for a shape the kind refuses.
const HeldMicrobatches& held_microbatches(pipeline::ScheduleKind kind, int P, int v, int m);

}  // namespace distlab::planner
