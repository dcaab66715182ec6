// Live events into a TraceModel: the library's LiveReceiver (a TCP listener,
// loopback unless told otherwise) drained once per frame.
//
// No GUI in here: the Trace panel owns one, and the tests use the very same
// class to check that a traced program's events arrive whole and in order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trace/live_stream.hpp"
#include "trace_model.hpp"

namespace distlab::viz {

class LiveFeed {
 public:
  // Throws std::runtime_error (port taken, bad address) with the reason.
  LiveFeed(int port, const std::string& bind_host);

  int port() const { return receiver_.port(); }
  const std::string& bind_host() const { return bind_host_; }
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
  trace::LiveReceiver receiver_;
};

}  // namespace distlab::viz
