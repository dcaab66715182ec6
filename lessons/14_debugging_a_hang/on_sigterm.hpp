// Lesson 14 on processes: what a rank does when it is stopped from outside.
//
// Once a rank has failed, distlab-run (and torchrun, and mpirun) sends
// SIGTERM to every other rank of the job, and SIGKILL a grace period later
// (distlab-run's --grace-ms, 5 s by default). The flight recorder's own
// handler (flight::dump_on_signals, installed by comm::run_job) writes the
// rank's file and dies at once. Lesson 14 puts its own in its place, which
// does the same after saying where the rank stood; and the rank that prints
// the diagnosis prints it first, inside the grace period: on processes that
// rank may learn of the failure only from this signal (the rank that died
// was SIGKILLed, and the launcher stopped the job before any wait timed out).
//
// A signal handler may only do what is async-signal-safe: flight::on_signals
// (lib/flight/signal_pipe.hpp) has the handler write a byte to a pipe, and
// a thread of its own reads it and runs `on_stop`.
#pragma once

#include <signal.h>

#include <functional>
#include <stdexcept>
#include <utility>

#include "flight/signal_pipe.hpp"

namespace distlab::lesson14 {

// From now on SIGTERM runs `on_stop` on a thread of its own. `on_stop` ends
// the process or returns (and the process goes on). Call once per process;
// what `on_stop` uses must live as long as the process, not only as long as
// main(): a SIGTERM may come while the process exits.
inline void on_sigterm(std::function<void()> on_stop) {
  static bool set = false;
  if (set) throw std::logic_error("lesson 14: on_sigterm is set once per process");
  set = true;
  flight::on_signals({SIGTERM}, [on_stop = std::move(on_stop)](int) { on_stop(); });
}

// Dies of SIGTERM as if it had never been caught: the launcher and the shell
// see the status they would have seen.
[[noreturn]] inline void die_of_sigterm() { flight::die_of(SIGTERM); }

}  // namespace distlab::lesson14
