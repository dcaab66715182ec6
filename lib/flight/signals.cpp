// dump_on_signals(): the handler writes the signal's number to a pipe; a
// watcher thread reads it and dumps. Only write() is async-signal-safe
// among what a dump needs.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <thread>

#include "flight/recorder.hpp"

namespace distlab::flight {
namespace {

int pipe_fds[2] = {-1, -1};

void on_signal(int signal_number) {
  const int saved = errno;  // a handler must leave errno as it found it
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  ssize_t ignored = write(pipe_fds[1], &byte, 1);
  (void)ignored;
  errno = saved;
}

void watch() {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = read(pipe_fds[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if (byte == SIGUSR1) {
      dump_all("SIGUSR1");
      continue;
    }
    dump_all("SIGTERM (stopped from outside, e.g. by the launcher after another rank failed)");
    // Die of SIGTERM as if it had never been caught: the launcher and the
    // shell see the same exit status as before.
    signal(SIGTERM, SIG_DFL);
    kill(getpid(), SIGTERM);
    return;
  }
}

}  // namespace

void dump_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return;  // no pipe: no dumps on signals, nothing else changes
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    std::thread(watch).detach();
  });
}

}  // namespace distlab::flight
