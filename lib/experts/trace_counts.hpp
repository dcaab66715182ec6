// Tokens per expert on the trace, for the visualizer's Experts panel and
// Perfetto's counter tracks: one counter sample per rank and step, named
// "experts LABEL" (LABEL: a layer, "layer 3", or a run), with the series
//
//   kept <e>     the assignments of this rank's tokens expert e took
//   dropped <e>  those its capacity dropped
//   capacity     an expert's capacity per forward (-1: dropless)
//
// for every expert e of the E: the load the router asked of each expert,
// and what was lost. Summed over the ranks they are the step's histogram.
#pragma once

#include <string>

#include "experts/moe.hpp"
#include "trace/recorder.hpp"

namespace distlab::experts {

inline constexpr const char* kExpertsCounterPrefix = "experts ";

// Adds `from`'s kept and dropped (per expert) to `into`'s; the capacity is `from`'s.
void add_counts(MoeStats& into, const MoeStats& from);

// One sample of `stats` on `rank` (nothing when the recorder is null or off).
void record_tokens_per_expert(trace::Recorder* recorder, int rank, const std::string& label, const MoeStats& stats);

}  // namespace distlab::experts
