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

// Memory counter samples of a run that trains `psi` fp32 parameters with
// Adam under DDP, ZeRO-1, ZeRO-2 and ZeRO-3 in turn, 3 steps each, evenly
// over [begin_us, end_us] (memory_model.hpp's convention). Per rank and
// step: a sample before the step (Adam's state absent before the first),
// one at its peak (activations, 1 MB of buffers, and under ZeRO-3 the
// largest unit gathered), one after (activations freed); per rank and
// stage the ZeRO paper's bytes as "accounting STAGE".
std::vector<trace::Event> make_synthetic_memory(int ranks, int64_t psi, int64_t begin_us, int64_t end_us);

}  // namespace distlab::viz
