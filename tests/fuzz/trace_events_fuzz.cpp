// The streaming trace reader (trace/reader.hpp): a Chrome trace file, read
// whole and read from a file in small chunks (the chunk size is the
// input's first byte), must give the same events or the same refusal, a
// TraceFormatError and nothing else. The push reader (push_reader.hpp),
// given the same chunks, reads the same events or fails (with a reason of
// its own) where the others refuse.
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_events.hpp"
#include "trace/json_pull.hpp"
#include "trace/push_reader.hpp"
#include "trace/reader.hpp"

using namespace distlab::trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ReadLimits limits;
  limits.max_events = 1000;

  std::vector<Event> whole, chunked;
  std::string whole_error, chunked_error;
  try {
    whole = parse_chrome_trace(text, limits);
  } catch (const TraceFormatError& e) {
    whole_error = e.what();
  }
  std::FILE* file = fmemopen(const_cast<char*>(text.data()), text.size(), "rb");
  if (file == nullptr) return 0;  // fmemopen refuses an empty buffer
  try {
    ByteSource source(file, chunk);
    stream_chrome(source, limits, [&](Event& e) { chunked.push_back(e); });
  } catch (const TraceFormatError& e) {
    chunked_error = e.what();
  }
  std::fclose(file);
  distlab::fuzz::check_same_events(whole, whole_error, chunked, chunked_error, "whole vs chunked",
                                     /*same_message=*/true);

  std::vector<Event> pushed;
  ChromePushReader push(limits, [&](Event& e) { pushed.push_back(e); });
  for (size_t at = 0; at < text.size(); at += chunk) push.push(text.data() + at, std::min(chunk, text.size() - at));
  const bool read_whole = push.finish();
  if (!read_whole) pushed.clear();  // what it delivered before failing is forgotten by its callers
  distlab::fuzz::check_same_events(whole, whole_error, pushed, read_whole ? "" : push.failure(), "whole vs pushed");
  return 0;
}
