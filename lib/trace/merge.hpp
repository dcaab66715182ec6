// One trace from many: the per-rank files a multi-process job writes
// (out.rank0.json, out.rank1.json, ...) merged into one file, so that
// Perfetto, which opens one file at a time, shows every rank and draws the
// send->recv arrows between them.
//
// Time agrees across ranks in the result: each file's clock offset (the
// "clock_offset" metadata a rank on another machine writes) is added to its
// rank's events, and every arrow goes from the send's begin to when the data
// arrived (the recv's end), never backwards: where the clocks still disagree
// (an offset not measured, or a recv that ended within the offset's
// uncertainty before the send began), the arrow ends at the send's begin and
// is counted in clamped_flows.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "trace/clock.hpp"

namespace distlab::trace {

struct MergeReport {
  size_t events = 0;
  size_t flows = 0;          // send->recv pairs with both ends present
  size_t clamped_flows = 0;  // of those, arrows whose recv ended before the send began
  std::map<int, ClockOffset> offsets;  // applied, by rank
};

// Reads every input (throws TraceFormatError naming a bad one) and writes
// all their events, ordered by begin time, to `output` through
// ChromeJsonSink.
MergeReport merge_trace_files(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace distlab::trace
