#include "signal_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace distlab::launcher {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1};
constexpr int kCount = sizeof kSignals / sizeof kSignals[0];
// The handler can reach only globals.
int g_write_fd = -1;
struct sigaction g_old[kCount];
struct sigaction g_old_pipe;

void on_signal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_write_fd, &byte, 1);  // pipe full: SIGCHLDs merge anyway
  (void)ignored;
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe() {
  if (g_write_fd >= 0) throw std::logic_error("only one SignalPipe per process");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("cannot create the signal pipe");
  read_fd_ = fds[0];
  g_write_fd = fds[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &action, &g_old[i]);
  // A reader that went away must not kill the launcher while workers run;
  // writes then fail with EPIPE, which write_all ignores.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &g_old_pipe);
}

SignalPipe::~SignalPipe() {
  for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &g_old[i], nullptr);
  ::sigaction(SIGPIPE, &g_old_pipe, nullptr);
  ::close(g_write_fd);
  ::close(read_fd_);
  g_write_fd = -1;
}

std::vector<int> SignalPipe::take() {
  std::vector<int> signals;
  unsigned char buffer[64];
  for (;;) {
    ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    signals.insert(signals.end(), buffer, buffer + n);
  }
  return signals;
}

}  // namespace distlab::launcher
