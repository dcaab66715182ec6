// A made-up run of the same-host ring for the Wire panel's tests, computed
// here step by step rather than by anything under test: one 5,000,000-byte
// message from rank 0 to rank 1 through a 2 MiB ring in 256 KiB chunks.
//
//   samples  1-8   rank 0 writes 8 chunks: the ring is full (head 2 MiB, tail 0)
//   samples  9-13  rank 1 reads 5: 3 chunks in flight, tail at 5/8 of the ring
//   samples 14-18  rank 0 writes 5: head passes the capacity (sample 14: head
//                  at 1/8 of the ring, 4 chunks in flight, the arc across 12 o'clock)
//   then     rank 1 reads one, rank 0 writes one, until all 20 chunks (the
//            last 19,264 B) are written; rank 1 reads the rest: sample 40
//            leaves the ring empty.
//
// Sample k (1-based) is taken at 1000 + 10 k us. The ring is named as the
// library names it, "0->1 (world d09c)"; another communicator's ring of the
// same pair, "0->1 (world 59e2)", starts after the run. The events are
// returned out of order (shuffled with a fixed seed), with a few that are
// not ring samples.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::viz::testing_util {

inline constexpr int64_t kWireMessage = 5'000'000;
inline constexpr int64_t kWireCapacity = 2 << 20;  // 2,097,152
inline constexpr int64_t kWireChunk = 256 << 10;   // 262,144

struct RingStep {
  int rank = 0;
  int64_t head = 0, tail = 0, at_us = 0;
};

// The ring 0->1's samples in time order, as simulated.
inline std::vector<RingStep> wire_run() {
  std::vector<RingStep> steps;
  int64_t head = 0, tail = 0;
  auto record = [&](int rank) { steps.push_back({rank, head, tail, 1000 + 10 * int64_t(steps.size() + 1)}); };
  auto write = [&] {
    head += std::min(kWireChunk, kWireMessage - head);
    record(0);
  };
  auto read = [&] {
    tail += std::min(kWireChunk, head - tail);
    record(1);
  };
  for (int i = 0; i < 8; ++i) write();
  for (int i = 0; i < 5; ++i) read();
  for (int i = 0; i < 5; ++i) write();
  while (head < kWireMessage) {
    read();
    write();
  }
  while (tail < head) read();
  return steps;
}

inline trace::Event ring_event(int rank, const std::string& ring, int64_t head, int64_t tail, int64_t capacity,
                               int64_t at_us) {
  return trace::counter_event(rank, "shm ring " + ring, {{"head", head}, {"tail", tail}, {"capacity", capacity}},
                              at_us);
}

inline constexpr const char* kWireRunRing = "0->1 (world d09c)";

// The run's samples, a header through another communicator's ring of the
// same pair, a short reply on 1->0 and two on 0->2 (after the run, named
// without a label), events that are not ring samples, all shuffled.
inline std::vector<trace::Event> wire_events() {
  std::vector<trace::Event> events;
  for (const RingStep& s : wire_run())
    events.push_back(ring_event(s.rank, kWireRunRing, s.head, s.tail, kWireCapacity, s.at_us));
  events.push_back(ring_event(0, "0->1 (world 59e2)", 48, 0, kWireCapacity, 7000));
  events.push_back(ring_event(1, "0->1 (world 59e2)", 48, 48, kWireCapacity, 7010));
  events.push_back(ring_event(1, "1->0", 64, 0, 4096, 5000));
  events.push_back(ring_event(0, "1->0", 64, 64, 4096, 5010));
  events.push_back(ring_event(0, "0->2", 8192, 0, 8192, 6000));
  events.push_back(ring_event(2, "0->2", 8192, 4096, 8192, 6010));
  events.push_back(trace::counter_event(0, "memory DDP", {{"parameters", 5}}, 10));
  trace::Event interval;  // a span that happens to carry a ring's name: not a counter
  interval.name = std::string("shm ring ") + kWireRunRing;
  interval.category = "send";
  interval.begin_us = 1;
  interval.end_us = 2;
  events.push_back(interval);
  std::mt19937 random(7);
  std::shuffle(events.begin(), events.end(), random);
  return events;
}

}  // namespace distlab::viz::testing_util
