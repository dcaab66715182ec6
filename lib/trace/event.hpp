// One thing that happened on one rank, over an interval of time.
//
// Every layer of DistLab speaks in these: the communicator records each send
// and recv, the collectives record their steps, DDP its buckets, the pipeline
// its forward and backward passes. The visualizer draws nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace distlab::trace {

// Common lanes: one row per (rank, lane) in a timeline.
inline constexpr const char* kLaneCompute = "compute";
inline constexpr const char* kLaneComm = "comm";

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
  // The value of args[key], or `fallback` when absent.
  std::string arg(const std::string& key, const std::string& fallback = {}) const;
};

// The flow id shared by the `seq`-th message from `src` to `dst` with `tag`.
// Messages between one pair with one tag are matched in order, so both sides
// can compute the id without talking to each other. Never 0.
uint64_t flow_id(int src, int dst, int64_t tag, uint64_t seq);

}  // namespace distlab::trace
