#include "flight/signal_pipe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace distlab::flight {
namespace {

// The handler can reach only globals: the pipe each signal writes to.
std::atomic<int> write_fd_of[NSIG];

void on_signal_number(int signal_number) {
  const int saved = errno;  // a handler leaves errno as it found it
  const int fd = write_fd_of[signal_number].load();
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, &byte, 1);  // a full pipe drops it: the reader has plenty to do already
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe(std::vector<int> signals) : signals_(std::move(signals)) {
  for (int signal_number : signals_)
    if (signal_number <= 0 || signal_number >= NSIG)
      throw std::invalid_argument("no signal numbered " + std::to_string(signal_number));
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("cannot make a pipe for signals: ") + std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  struct sigaction action {};
  action.sa_handler = on_signal_number;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal_number : signals_) {
    write_fd_of[signal_number].store(write_fd_);
    replaced_.emplace_back();
    ::sigaction(signal_number, &action, &replaced_.back());
  }
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < signals_.size(); ++i) {
    ::sigaction(signals_[i], &replaced_[i], nullptr);
    int mine = write_fd_;
    write_fd_of[signals_[i]].compare_exchange_strong(mine, -1);
  }
  ::close(write_fd_);
  ::close(read_fd_);
}

std::vector<int> SignalPipe::take() {
  std::vector<int> arrived;
  unsigned char buffer[64];
  for (;;) {
    const ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    arrived.insert(arrived.end(), buffer, buffer + n);
  }
  return arrived;
}

void on_signals(std::vector<int> signals, std::function<void(int)> on_signal) {
  // Never destroyed, for the reason in the header.
  auto* pipe = new SignalPipe(std::move(signals));
  auto* run = new std::function<void(int)>(std::move(on_signal));
  std::thread([pipe, run] {
    for (;;) {
      struct pollfd wait_for{pipe->fd(), POLLIN, 0};
      if (::poll(&wait_for, 1, -1) < 0 && errno != EINTR) return;
      for (int signal_number : pipe->take()) (*run)(signal_number);
    }
  }).detach();
}

void die_of(int signal) {
  ::signal(signal, SIG_DFL);
  sigset_t just_this;
  sigemptyset(&just_this);
  sigaddset(&just_this, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &just_this, nullptr);
  ::kill(::getpid(), signal);
  for (;;) ::pause();
}

}  // namespace distlab::flight
