// The naive reference reader: each event object parsed into an nlohmann
// DOM, converted, then dropped. Simple to check by eye, and ~7 s and 550 MB
// for a million events (the whole file is in memory as text). The library
// reads with the streaming reader (reader.hpp); tests hold the two equal on
// every file, and parse_event_line (one short live-stream line) uses this.
#pragma once

#include <string>
#include <vector>

#include "trace/reader.hpp"

namespace distlab::trace {

std::vector<Event> parse_chrome_trace_dom(const std::string& text, const ReadLimits& limits = {});

}  // namespace distlab::trace
