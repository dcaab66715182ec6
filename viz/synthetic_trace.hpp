// A made-up but realistic trace: data-parallel training iterations on
// `ranks` ranks, each a forward and a backward pass on the compute lane and a
// ring all-reduce on the comm lane (one "collective" span holding 2(p-1)
// steps, each step a send to the right neighbour and a recv from the left
// one, paired by flow ids as the communicator pairs them).
//
// The benchmark, the screenshots and the tests use it before any lesson
// exists; written through trace::ChromeJsonSink it is a file written by the
// library like any other.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/event.hpp"

namespace distlab::viz {

struct SyntheticTraceOptions {
  int ranks = 4;
  int64_t events = 1000;  // exactly this many (the last iteration is cut)
  uint32_t seed = 1;
  int64_t start_us = 1'000'000;
};

// Events in the order a recorder would see them: per iteration, rank by rank.
std::vector<trace::Event> make_synthetic_trace(const SyntheticTraceOptions& options);

}  // namespace distlab::viz
