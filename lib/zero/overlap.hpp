// How much of a ZeRO step's communication ran while the rank computed, read
// from a trace.
//
// The shard's collectives are spans on the "zero" lane (categories
// "zero_all_gather" and "zero_reduce_scatter", arg "step"), run by a comm
// thread; compute is any span of the same rank and step whose category the
// caller names (ZeRO-3's "zero_forward" for each unit's forward, and the
// caller's own span around backward), less the time compute stood still
// waiting for a collective (ZeRO-3's "zero_wait" spans, which a backward
// span contains when a unit's all-gather was late). Spans are merged into
// unions of intervals first, so that overlapping spans count once:
//
//   communication  the union of the collectives' spans
//   hidden         the part of it inside compute (less the waits)
//   exposed        the rest: time the collectives ran with no compute beside them
//
// For ZeRO-3 with prefetch, unit u+1's all-gather runs under unit u's
// forward: hidden. Without prefetch each all-gather runs alone: exposed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::zero {

struct CommOverlap {
  int collectives = 0;        // collective spans of the step
  int64_t comm_us = 0;        // their union's length
  int64_t hidden_us = 0;      // of that, under compute
  int64_t exposed_us() const { return comm_us - hidden_us; }
  double fraction() const { return comm_us > 0 ? static_cast<double>(hidden_us) / static_cast<double>(comm_us) : 0.0; }
};

// Step `step` of rank `rank`; compute is the spans whose category is in `compute`.
CommOverlap comm_overlap_of_step(const std::vector<trace::Event>& events, int rank, int64_t step,
                                 const std::vector<std::string>& compute);

}  // namespace distlab::zero
