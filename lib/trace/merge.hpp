// One trace from many: the per-rank files a multi-process job writes
// (out.rank0.json, out.rank1.json, ...) merged into one file, so that
// Perfetto, which opens one file at a time, shows every rank and draws the
// send->recv arrows between them.
#pragma once

#include <string>
#include <vector>

namespace distlab::trace {

// Reads every input (throws TraceFormatError naming a bad one) and writes
// all their events, ordered by begin time, to `output` through
// ChromeJsonSink. Returns the number of events written.
size_t merge_trace_files(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace distlab::trace
