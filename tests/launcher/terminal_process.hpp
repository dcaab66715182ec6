// A program started on a pseudo-terminal of its own, as if typed at a
// shell: the terminal is its stdin, stdout and stderr, its controlling
// terminal, with its process group in the foreground. The test types into
// it and reads what it printed (with the terminal's "\r\n" turned into
// "\n", and what the terminal echoes of the typing included).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace distlab::launcher::testing {

class TerminalProcess {
 public:
  // argv[0] is a path. Throws std::runtime_error when it cannot start.
  explicit TerminalProcess(const std::vector<std::string>& argv);
  ~TerminalProcess();  // SIGKILL to its process group if still running
  TerminalProcess(const TerminalProcess&) = delete;
  TerminalProcess& operator=(const TerminalProcess&) = delete;

  // Reads until `text` has been printed (true) or `limit` passed (false).
  bool wait_for(const std::string& text, std::chrono::milliseconds limit);
  // Reads whatever comes during `duration`.
  void read_for(std::chrono::milliseconds duration);
  // Everything printed so far.
  const std::string& output() const { return output_; }
  // Writes `text` to the terminal, as typed ("\n" is Enter, "\x04" Ctrl-D
  // at the start of a line).
  void type(const std::string& text);
  bool running();
  // Reads to the end and returns the exit code (128 + signal when killed by
  // one); past `limit` it kills the process and returns -1.
  int wait_exit(std::chrono::milliseconds limit);

 private:
  // Reads what arrives within `timeout_ms`: the bytes read, 0 for none, -1
  // once the terminal is closed.
  int read_some(int timeout_ms);

  pid_t pid_ = -1;
  int master_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string output_;
};

}  // namespace distlab::launcher::testing
