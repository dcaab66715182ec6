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
  // The peak over the step of the sum over rank `rank`'s stages of the
  // bytes of what each holds, and the microbatches held then: bytes[s][k]
  // is stage s's bytes while it holds k microbatches (k = 0 .. m). With
  // `after_first_release`, the peak once the rank's first backward is done
  // (a microbatch is held until its backward ends, so the second
  // backward's moment counts).
  std::pair<int64_t, int> peak(int rank, const std::vector<std::vector<int64_t>>& bytes,
                               bool after_first_release = false) const;
  // When stage `stage`'s last microbatch is released: its last backward's end.
  double last_release(int stage) const;
  // The bytes rank `rank`'s stages other than `except` hold just before `time`.
  int64_t others_before(int rank, int except, double time, const std::vector<std::vector<int64_t>>& bytes) const;
};

// Throws pipeline::ScheduleError for a shape the kind refuses.
// `splits_backward` false: the stages run all of B at I (a recomputed
// layer), which frees the microbatch there.
const HeldMicrobatches& held_microbatches(pipeline::ScheduleKind kind, int P, int v, int m, bool splits_backward = true);

}  // namespace distlab::planner
