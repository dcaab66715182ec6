#include "stdin_forwarder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "child_process.hpp"

namespace distlab::launcher {

bool stdin_is_foreground_terminal() {
  return ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

StdinForwarder::StdinForwarder(int from) : from_(from) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw LaunchError(std::string("cannot create a pipe for rank 0's stdin: ") + std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // The loop must never block on a worker that does not read.
  ::fcntl(write_fd_, F_SETFL, O_NONBLOCK);
}

StdinForwarder::~StdinForwarder() {
  worker_started();
  close_pipe();
}

void StdinForwarder::worker_started() {
  if (read_fd_ >= 0) ::close(read_fd_);
  read_fd_ = -1;
}

pollfd StdinForwarder::poll_entry() const {
  if (write_fd_ < 0) return {-1, 0, 0};
  if (!pending_.empty()) return {write_fd_, POLLOUT, 0};
  return {end_of_input_ ? -1 : from_, POLLIN, 0};
}

void StdinForwarder::on_ready(short revents) {
  if (write_fd_ < 0 || revents == 0) return;
  if (!pending_.empty()) {
    write_pending();
    return;
  }
  char buffer[4096];
  ssize_t n;
  do n = ::read(from_, buffer, sizeof buffer);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    pending_.assign(buffer, static_cast<size_t>(n));
    write_pending();
  } else if (n == 0 || errno != EAGAIN) {
    end_of_input_ = true;  // Ctrl-D on a terminal, or a stdin that failed
    close_pipe();
  }
}

void StdinForwarder::write_pending() {
  while (!pending_.empty()) {
    ssize_t n = ::write(write_fd_, pending_.data(), pending_.size());
    if (n > 0) {
      pending_.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;  // the pipe is full: poll for room
    } else {
      close_pipe();  // the worker closed its end (or ended): nobody reads any more
      return;
    }
  }
}

void StdinForwarder::close_pipe() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
  pending_.clear();
}

}  // namespace distlab::launcher
