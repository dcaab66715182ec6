// Reading traces back: Chrome Trace Event JSON files and live-stream lines.
//
// Used by the visualizer, distlab-trace merge and the tests. Input is
// untrusted (a file from anywhere, bytes from a socket): every problem
// becomes a TraceFormatError with a message that says where, never a crash.
//
// Files are read as a stream (json_pull.hpp): each event is handed to the
// caller as soon as its object closes and nothing else is kept, so memory
// does not grow with the file and a million events read in about a second.
// dom_reader.hpp keeps the DOM reader it replaced, as the reference.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/clock.hpp"
#include "trace/event.hpp"

namespace distlab::trace {

class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class JsonSyntaxError : public TraceFormatError {
 public:
  using TraceFormatError::TraceFormatError;
};

struct ReadLimits {
  int64_t max_file_bytes = int64_t{64} << 30;  // 64 GiB: the file is streamed, only events count
  int64_t max_events = 50'000'000;
};

// What a file says besides its events.
struct TraceInfo {
  int64_t events = 0;  // complete ("X") and counter ("C") events delivered
  // rank -> its clock's offset to rank 0's, from "clock_offset" metadata
  // (ChromeJsonSink::write_clock_offset). Not yet applied to the events.
  std::map<int, ClockOffset> clock_offsets;
};

// Called once per event; the Event is reused for the next one (move from it
// freely).
using EventHandler = std::function<void(Event&)>;

// Every complete ("X") event of a Chrome trace, in file order. Accepts both
// {"traceEvents":[...]} and a bare [...] array. Lanes come from args.lane
// (DistLab's files) or else from "thread_name" metadata, else the tid.
// Counter ("C") events come in the same order, as counter samples
// (event.hpp): name and pid as given, ts as begin and end, category and lane
// "counter", each arg a series with its value as text (a number in decimal);
// "cat", "id" and "dur" are ignored. The limit on events counts both kinds.
TraceInfo stream_chrome_file(const std::string& path, const ReadLimits& limits, const EventHandler& on_event);
TraceInfo stream_chrome_text(const std::string& text, const ReadLimits& limits, const EventHandler& on_event);

// The same, collected (small traces, tests).
std::vector<Event> read_chrome_trace(const std::string& path, const ReadLimits& limits = {},
                                     TraceInfo* info = nullptr);
std::vector<Event> parse_chrome_trace(const std::string& text, const ReadLimits& limits = {},
                                      TraceInfo* info = nullptr);

class JsonPull;
class ByteSource;
// The same from any source (tests read files in tiny chunks through it).
TraceInfo stream_chrome(ByteSource& source, const ReadLimits& limits, const EventHandler& on_event);

// The per-element half of the reader, for callers that find the event
// objects themselves (the viewer recovering a cut-short file line by line).
// parse() only checks syntax and keeps the element; deliver() interprets it
// (thread names, clock offsets, an "X" or "C" event to the handler) and
// throws for bad fields.
class ChromeEventReader {
 public:
  ChromeEventReader(const ReadLimits& limits, EventHandler on_event);
  ~ChromeEventReader();
  void parse(JsonPull& json);
  void deliver();
  const TraceInfo& info() const { return info_; }

 private:
  struct Element;
  ReadLimits limits_;
  EventHandler on_event_;
  TraceInfo info_;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;
  std::unique_ptr<Element> element_;
  Event event_;
};

// `event` moved into rank 0's clock by its rank's offset (TraceInfo's
// clock_offsets, a live stream's metadata). Throws TraceFormatError when a
// time would leave int64's range (a hostile offset), instead of wrapping.
void apply_clock_offset(Event& event, int64_t offset_us);

// One line of the live stream: a single "X" or "C" event object, as
// event_to_json() writes it. Throws TraceFormatError.
Event parse_event_line(const std::string& line);

// A live-stream line that is a "clock_offset" metadata object (as
// clock_offset_json() in chrome_json.hpp writes it): its rank and offset.
// Nothing for any other line; throws TraceFormatError when it is a
// clock_offset without its numbers.
std::optional<std::pair<int, ClockOffset>> parse_clock_offset_line(const std::string& line);

}  // namespace distlab::trace
