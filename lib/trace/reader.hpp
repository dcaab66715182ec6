// Reading traces back: Chrome Trace Event JSON files and live-stream lines.
//
// Used by the visualizer and by the tests. Input is untrusted (a file from
// anywhere, bytes from a socket): every problem becomes a TraceFormatError
// with a message that says where, never a crash.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::trace {

class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ReadLimits {
  int64_t max_file_bytes = int64_t{4} << 30;  // 4 GiB
  int64_t max_events = 50'000'000;
};

// Every complete ("X") event of a Chrome trace, in file order. Accepts both
// {"traceEvents":[...]} and a bare [...] array. Lanes come from args.lane
// (DistLab's files) or else from "thread_name" metadata, else the tid.
std::vector<Event> read_chrome_trace(const std::string& path, const ReadLimits& limits = {});
std::vector<Event> parse_chrome_trace(const std::string& text, const ReadLimits& limits = {});

// One line of the live stream: a single "X" event object, as event_to_json()
// writes it. Throws TraceFormatError.
Event parse_event_line(const std::string& line);

}  // namespace distlab::trace
