// The live stream's receiving side (trace/live_stream.hpp): a sender's
// bytes, cut into pieces as a socket delivers them, through the
// LiveLineDecoder each connection of LiveReceiver (and the browser build's
// relay) keeps. Whatever comes, it returns events or names a problem and
// then ignores the connection; its buffer never holds more than one line.
// The first byte picks the piece size and whether the hello comes first.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace/live_stream.hpp"

using namespace distlab::trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + (data[0] & 0x3f) * 7;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 0x80) bytes = std::string(kLiveHello) + "\n" + bytes;
  LiveLineDecoder decoder;
  bool failed = false;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    const std::string part = bytes.substr(at, piece);
    LiveLineDecoder::Result result = decoder.feed(part.data(), part.size());
    if (failed && (!result.events.empty() || !result.offsets.empty())) {
      std::fprintf(stderr, "live_stream_fuzz: events delivered after the connection was dropped\n");
      std::abort();
    }
    failed = failed || !result.problem.empty();
  }
  return 0;
}
