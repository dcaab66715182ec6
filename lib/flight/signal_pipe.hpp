// Signals as bytes on a pipe (the self-pipe trick): a signal handler may
// only do what is async-signal-safe, so the handler writes the signal's
// number to a pipe and ordinary code reads it there: in a poll() loop
// (distlab-run) or on a thread of its own (the flight recorder's dumps,
// lesson 14's SIGTERM).
//
// Several pipes may live in one process, each for its own signals; a signal
// goes to the pipe installed for it last.
#pragma once

#include <signal.h>

#include <functional>
#include <vector>

namespace distlab::flight {

class SignalPipe {
 public:
  // Installs a handler for each of `signals` (SA_RESTART), keeping the
  // handlers it replaces. Throws std::runtime_error without a pipe.
  explicit SignalPipe(std::vector<int> signals);
  // Puts the replaced handlers back and closes the pipe.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // The read end, non-blocking: poll() it.
  int fd() const { return read_fd_; }
  // The signals that arrived since the last call, in order; never blocks.
  std::vector<int> take();

 private:
  std::vector<int> signals_;
  std::vector<struct ::sigaction> replaced_;  // by signal, as signals_
  int read_fd_ = -1, write_fd_ = -1;
};

// From now on, for the rest of the process, each of `signals` runs
// `on_signal(number)` on a thread of its own. Its pipe and handlers are
// never removed: a signal may come while the process exits, so what
// `on_signal` uses must live as long as the process.
void on_signals(std::vector<int> signals, std::function<void(int)> on_signal);

// Dies of `signal` as if it had never been caught: the launcher and the
// shell see the status they would have seen.
[[noreturn]] void die_of(int signal);

}  // namespace distlab::flight
