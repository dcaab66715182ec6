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
// A signal handler may only do what is async-signal-safe: this one writes a
// byte to a pipe, and a thread of its own reads it and runs `on_stop`.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace distlab::lesson14 {

namespace detail {
inline int sigterm_pipe[2] = {-1, -1};
// Never destroyed: the thread may run it while the process exits.
inline std::function<void()>* on_stop = nullptr;

inline void on_sigterm_signal(int) {
  const int saved = errno;  // a handler leaves errno as it found it
  const unsigned char byte = 1;
  ssize_t ignored = write(sigterm_pipe[1], &byte, 1);
  (void)ignored;
  errno = saved;
}
}  // namespace detail

// From now on SIGTERM runs `on_stop` on a thread of its own. `on_stop` ends
// the process or returns (and the process goes on). Call once per process;
// what `on_stop` uses must live as long as the process, not only as long as
// main(): a SIGTERM may come while the process exits.
inline void on_sigterm(std::function<void()> on_stop) {
  if (detail::sigterm_pipe[0] >= 0) throw std::logic_error("lesson 14: on_sigterm is set once per process");
  if (pipe2(detail::sigterm_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("lesson 14: cannot make the SIGTERM pipe: ") + strerror(errno));
  detail::on_stop = new std::function<void()>(std::move(on_stop));
  std::thread([] {
    unsigned char byte = 0;
    for (;;) {
      const ssize_t n = read(detail::sigterm_pipe[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      (*detail::on_stop)();
    }
  }).detach();
  struct sigaction action {};
  action.sa_handler = detail::on_sigterm_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
}

// Dies of SIGTERM as if it had never been caught: the launcher and the shell
// see the status they would have seen.
[[noreturn]] inline void die_of_sigterm() {
  signal(SIGTERM, SIG_DFL);
  kill(getpid(), SIGTERM);
  for (;;) pause();
}

}  // namespace distlab::lesson14
