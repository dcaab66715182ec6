// Runs the built `distlab-trace why ARGS` (DISTLAB_TRACE_PATH) through the
// shell, as a user would, and returns what it printed and its exit status.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace distlab::flight_test {

struct ToolRun {
  std::string out;  // stdout and stderr
  int exit_code = -1;
};

inline ToolRun run_why(const std::string& args) {
  ToolRun run;
  FILE* pipe = popen((std::string(DISTLAB_TRACE_PATH) + " why " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) run.out.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace distlab::flight_test
