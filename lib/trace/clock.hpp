// The one clock of all trace events.
#pragma once

#include <cstdint>

namespace distlab::trace {

// Microseconds of CLOCK_MONOTONIC (std::chrono::steady_clock on Linux). It is
// shared by every process of one machine; processes on different machines
// measure their offset to rank 0 at start-up (comm/clock_sync.hpp) and the
// readers apply it.
//
// DISTLAB_TRACE_CLOCK_SHIFT_US=N adds N to this process's clock: a second
// machine's unrelated clock, made on one machine for the tests.
int64_t now_us();
// Which clock now_us() reads: equal on every process of one boot of one
// machine (one CLOCK_MONOTONIC, containers included) with the same
// DISTLAB_TRACE_CLOCK_SHIFT_US. Processes of one domain need no offset.
uint64_t clock_domain();

// The wall-clock time (microseconds since 1970) of an instant on now_us()'s
// clock. The offset between the two clocks is read once per process, as the
// closest of a few paired readings, so every conversion a process makes
// agrees: one instant written down twice (a flight file dumped on SIGUSR1,
// then again on SIGTERM) becomes the same date both times. Read anew at
// each call, a reading preempted between its two clocks would move the
// date by as long as the preemption.
int64_t unix_us_of(int64_t trace_us);

// What to add to a rank's timestamps to put them on rank 0's clock. The
// true offset lies within offset_us +- uncertainty_us (half the round trip
// of the best ping-pong: the reply was stamped somewhere inside it).
struct ClockOffset {
  int64_t offset_us = 0;
  int64_t uncertainty_us = 0;
};

}  // namespace distlab::trace
