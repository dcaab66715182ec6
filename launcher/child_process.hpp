// One worker process: started in its own process group with its stdout and
// stderr on pipes, its stdin on /dev/null (or, for rank 0, a pipe from the
// launcher's terminal: stdin_forwarder.hpp), and tied to the launcher's life.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::launcher {

// The program cannot be started at all: one line, no restart would help.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChildProcess {
  pid_t pid = -1;   // also the id of its process group
  int out_fd = -1;  // read end of its stdout, non-blocking
  int err_fd = -1;  // read end of its stderr, non-blocking
};

// `path` from find_program; `argv` with argv[0]; `env` as "NAME=value";
// `stdin_fd` becomes the worker's stdin (-1: /dev/null).
// Throws LaunchError naming the program when exec fails.
ChildProcess start_child(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env, int stdin_fd = -1);

// `name` as execvp would find it in `path_var` (PATH); a name with a '/' is
// taken as is. Throws LaunchError when there is nothing executable.
std::string find_program(const std::string& name, const std::string& path_var);

// How a waited-for process ended, in words: "exited with code 3",
// "was killed by SIGSEGV".
std::string describe_wait_status(int wait_status);
bool wait_status_ok(int wait_status);
// "SIGSEGV"; "signal 42" for the rare ones.
std::string signal_name(int sig);

}  // namespace distlab::launcher
