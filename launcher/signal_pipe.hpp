// SIGINT, SIGTERM, SIGHUP, SIGCHLD and SIGUSR1 turned into bytes on a pipe, so the
// launcher's one poll() loop sees signals and worker output alike, and no
// work happens inside a signal handler (the self-pipe trick).
#pragma once

#include <vector>

namespace distlab::launcher {

class SignalPipe {
 public:
  SignalPipe();   // installs the handlers; one SignalPipe per process
  ~SignalPipe();  // puts the old handlers back
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const { return read_fd_; }
  // The signals that arrived since the last call, in order.
  std::vector<int> take();

 private:
  int read_fd_ = -1;
};

}  // namespace distlab::launcher
