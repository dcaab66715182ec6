// One thing that happened on one rank, over an interval of time.
//
// Every layer of DistLab speaks in these: the communicator records each send
// and recv, the collectives record their steps, DDP its buckets, the pipeline
// its forward and backward passes. The visualizer draws nothing else.
//
// A counter sample is an Event too: the values of a few named series at one
// instant (a rank's memory: parameters, gradients, optimizer state, ...), so
// that a trace can show how they change over time. It has
//   category  kCounterCategory (what tells it from an interval: is_counter())
//   lane      kLaneCounter
//   name      the counter's name ("memory"): one counter track per rank and name
//   begin_us  the sample's time, and end_us the same (no duration)
//   args      the series in the order given, each value a decimal integer
//             as text ("parameters" -> "123")
// and no bytes, peer or flow. Recorder::counter() records one; Chrome JSON
// writes it as a counter ("C") event, which Perfetto and chrome://tracing
// draw as a counter track, and reads it back as the same Event (its series
// then in key order, as every event's args come back).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace distlab::trace {

// Common lanes: one row per (rank, lane) in a timeline.
inline constexpr const char* kLaneCompute = "compute";
inline constexpr const char* kLaneComm = "comm";
// The category and the lane of every counter sample (see above).
inline constexpr const char* kCounterCategory = "counter";
inline constexpr const char* kLaneCounter = "counter";

// A counter sample's series: (name, value), in the order they are shown.
using CounterValues = std::vector<std::pair<std::string, int64_t>>;

struct Event {
  int rank = 0;
  std::string lane;      // "compute", "comm", or a pipeline stage name
  std::string name;      // what is shown on the box: "send", "ring step 2", "fwd mb 3"
  std::string category;  // fwd, bwd, send, recv, collective, step, bucket, optimizer, ...
  int64_t begin_us = 0;  // microseconds on trace::now_us()'s clock
  int64_t end_us = 0;
  int64_t bytes = 0;     // payload moved, 0 when nothing moves
  int peer = -1;         // the other rank of a send or recv, -1 when none
  // A send and the recv that matched it carry the same nonzero flow id, so a
  // trace can draw an arrow from one to the other (see flow_id()).
  uint64_t flow = 0;
  // Free-form details: step, microbatch, bucket, algorithm, tag, ...
  std::vector<std::pair<std::string, std::string>> args;

  int64_t duration_us() const { return end_us - begin_us; }
  // A counter sample rather than an interval: consumers that draw or time
  // intervals skip it.
  bool is_counter() const { return category == kCounterCategory; }
  // The value of args[key], or `fallback` when absent.
  std::string arg(const std::string& key, const std::string& fallback = {}) const;
};

// The flow id shared by the `seq`-th message from `src` to `dst` with `tag`.
// Messages between one pair with one tag are matched in order, so both sides
// can compute the id without talking to each other. Never 0.
uint64_t flow_id(int src, int dst, int64_t tag, uint64_t seq);

// The counter sample of `values` on `rank`, named `name`, taken at `at_us`.
Event counter_event(int rank, const std::string& name, const CounterValues& values, int64_t at_us);

// The bytes `rank` sent between from_us and to_us, read from `events`: the
// collectives' steps (each ring step's span carries the bytes this rank
// sent in it).
int64_t bytes_sent(const std::vector<Event>& events, int rank, int64_t from_us, int64_t to_us);

}  // namespace distlab::trace
