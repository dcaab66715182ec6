// The DOM reader (trace/dom_reader.hpp), the reference the streaming
// reader is held to: on any bytes both give the same events or both refuse
// with a TraceFormatError.
#include <string>
#include <vector>

#include "fuzz_events.hpp"
#include "trace/dom_reader.hpp"
#include "trace/reader.hpp"

using namespace distlab::trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ReadLimits limits;
  limits.max_events = 1000;
  std::vector<Event> dom, streamed;
  std::string dom_error, stream_error;
  try {
    dom = parse_chrome_trace_dom(text, limits);
  } catch (const TraceFormatError& e) {
    dom_error = e.what();
  }
  try {
    streamed = parse_chrome_trace(text, limits);
  } catch (const TraceFormatError& e) {
    stream_error = e.what();
  }
  distlab::fuzz::check_same_events(dom, dom_error, streamed, stream_error, "the DOM and the streaming reader");
  return 0;
}
