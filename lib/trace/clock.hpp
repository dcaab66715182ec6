// The one clock of all trace events.
#pragma once

#include <cstdint>

namespace distlab::trace {

// Microseconds of CLOCK_MONOTONIC (std::chrono::steady_clock on Linux). It is
// shared by every process of one machine, so traces of ranks that run as
// separate processes line up without any clock exchange.
int64_t now_us();

}  // namespace distlab::trace
