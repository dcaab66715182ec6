// Opening trace files for the visualizer: the library's reader plus two
// things a viewer needs.
//
// - A trace cut short (a run that crashed, or one still being written) is
//   read up to its last complete line: the library's sink writes one event
//   per line, so every complete line is a whole event. The result carries a
//   warning saying how much was recovered.
// - Limits suited to an interactive program (see kViewerLimits), and every
//   failure, whatever its kind, becomes one TraceFormatError naming the file.
#pragma once

#include <string>
#include <vector>

#include "trace/event.hpp"
#include "trace/reader.hpp"

namespace distlab::viz {

// 10 million events (about 2 GB while reading, 0.8 GB once loaded) and 2 GiB
// of JSON: more than any lesson writes, less than the machine has.
inline const trace::ReadLimits kViewerLimits{int64_t{2} << 30, 10'000'000};

struct LoadedTrace {
  std::vector<trace::Event> events;
  std::vector<std::string> warnings;  // recovered from a truncated file, no events, ...
};

// Throws trace::TraceFormatError when nothing can be read.
LoadedTrace load_trace_text(const std::string& text, const trace::ReadLimits& limits = kViewerLimits);
LoadedTrace load_trace_file(const std::string& path, const trace::ReadLimits& limits = kViewerLimits);

}  // namespace distlab::viz
