// Clocks that agree across machines: each rank's offset to rank 0's trace
// clock, measured NTP-style at start-up through the communicator.
//
// Rank r stamps t1, sends a ping to rank 0, which answers with its own clock
// T read between receiving the ping and sending the pong; r stamps t4 when
// the pong is in. T was read somewhere inside [t1, t4] of r's clock, so
//
//   offset = T - (t1 + t4) / 2,   |true offset - offset| <= (t4 - t1) / 2
//
// and the round with the shortest round trip gives the tightest bound. The
// offset is written into r's trace ("clock_offset" metadata) and the readers
// (distlab-trace merge, the visualizer) add it to r's times. A rank whose
// clock is rank 0's (trace::clock_domain: the same machine) takes {0, 0}
// without pinging.
#pragma once

#include "comm/communicator.hpp"
#include "trace/clock.hpp"
#include "trace/config.hpp"

namespace distlab::comm {

inline constexpr int kClockSyncRounds = 16;
// A tag of its own, so the pings do not shift the message numbering (and
// flow ids) of the job's own tags.
inline constexpr int kClockSyncTag = (1 << 30) - 1;

// Called by every rank at once. Rank 0 answers each other rank of another
// clock in turn and returns {0, 0}. Throws TimeoutError (naming the peer)
// if a rank is missing.
trace::ClockOffset measure_clock_offset(Communicator& comm, int rounds = kClockSyncRounds);

// Start-up of a multi-process job whose communicator's recorder has no sinks
// yet: when a trace file or a live stream is asked for, measures the offset
// first (so the pings stay out of the trace), then adds the configured
// sinks and writes the offset into the file and onto the stream. Every rank
// must be given the same config.
void start_tracing(Communicator& comm, const trace::Config& config, bool several_processes);

}  // namespace distlab::comm
