// Measures the cost model's alpha and beta on the backend in use, for
// lessons' --calibrate: predictions then speak of this machine.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "collectives/cost_model.hpp"
#include "comm/communicator.hpp"

namespace distlab::collectives {

struct CalibrationOptions {
  int warmup = 3;                  // round trips not timed (first touches, allocations)
  int iterations = 20;             // timed round trips per size; the median is kept
  int64_t large_bytes = 4 << 20;   // the message that measures bandwidth
  c10::Device device = c10::kCPU;  // where the ping-pong buffers live
};

// Ranks 0 and 1 play ping-pong while the others wait: alpha is half the
// round trip of a 1-byte message, beta is half the round trip of a
// large_bytes message, less alpha, per byte. Rank 0 then broadcasts the
// result, so every rank returns the same LinkParams. Called by every rank.
// With one rank there is no link: returns {0, 0}.
LinkParams calibrate(comm::Communicator& comm, const CalibrationOptions& options = {});

}  // namespace distlab::collectives
