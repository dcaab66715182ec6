// The launcher's terminal, forwarded to the worker of global rank 0 (as
// mpirun forwards its stdin to rank 0): a lesson run with --step waits there
// for Enter (lessons/common/lesson.hpp). The worker reads a pipe that the
// launcher's poll loop fills with what the terminal gives: a line at a time
// when Enter is pressed; Ctrl-D (end of input) closes the pipe. Bytes wait
// in the launcher while the pipe is full, and the terminal is not read
// meanwhile.
#pragma once

#include <poll.h>

#include <string>

namespace distlab::launcher {

// Whether to forward at all: stdin is a terminal and this launcher is in the
// terminal's foreground (a launcher started with `&` would be stopped by
// SIGTTIN on reading it, and leaves it to the shell).
bool stdin_is_foreground_terminal();

class StdinForwarder {
 public:
  // Opens the pipe. `from`: the launcher's stdin.
  explicit StdinForwarder(int from);
  ~StdinForwarder();
  StdinForwarder(const StdinForwarder&) = delete;
  StdinForwarder& operator=(const StdinForwarder&) = delete;

  // The pipe's read end, to become the worker's stdin (start_child).
  int worker_end() const { return read_fd_; }
  // After the worker started: the launcher keeps only the write end.
  void worker_started();

  // What the poll loop watches: `from` for input while nothing waits to be
  // written, else the pipe for room. fd -1 once the pipe is closed.
  pollfd poll_entry() const;
  // Called with the revents poll() returned for poll_entry().
  void on_ready(short revents);
  // Closes the pipe (the worker sees end of input).
  void close_pipe();

 private:
  void write_pending();

  int from_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::string pending_;  // read from `from`, not yet in the pipe
  bool end_of_input_ = false;
};

}  // namespace distlab::launcher
