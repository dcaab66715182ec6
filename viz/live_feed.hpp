// Live events into a TraceModel: the library's LiveReceiver (a TCP listener,
// loopback unless told otherwise) drained once per frame.
//
// No GUI in here: the Trace panel owns one, and the tests use the very same
// class to check that a traced program's events arrive whole and in order.
// In the browser build the events come from the class server's relay over
// a WebSocket instead (viz/web/relay_receiver.hpp), through the same interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trace/live_stream.hpp"
#ifdef __EMSCRIPTEN__
#include "relay_receiver.hpp"
#endif
#include "trace_model.hpp"

namespace distlab::viz {

class LiveFeed {
 public:
  // Throws std::runtime_error (port taken, bad address) with the reason.
  LiveFeed(int port, const std::string& bind_host);

  int port() const { return receiver_.port(); }
  const std::string& bind_host() const { return bind_host_; }
  // Where the events come from ("127.0.0.1:29400", or the page's WebSocket),
  // and the line that says how to send them.
  std::string source() const;
  std::string announcement() const;
  // Moves what arrived into `model` (not finalized); returns how many events.
  size_t poll(TraceModel& model);
  uint64_t total() const { return receiver_.total(); }
  // Senders refused so far (bad hello, malformed or oversized line).
  std::vector<std::string> errors() const { return receiver_.errors(); }
  // Clock offsets to rank 0 that ranks of a multi-process job announced;
  // their events arrive already moved into rank 0's clock.
  std::map<int, trace::ClockOffset> clock_offsets() const { return receiver_.clock_offsets(); }
  // Waits for `count` events in all; for tests and scripted runs.
  uint64_t wait_for(uint64_t count, int timeout_ms) { return receiver_.wait_for(count, timeout_ms); }

 private:
  std::string bind_host_;
#ifdef __EMSCRIPTEN__
  RelayReceiver receiver_;
#else
  trace::LiveReceiver receiver_;
#endif
};

}  // namespace distlab::viz
