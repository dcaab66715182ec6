// Runs a built program as a user's shell would, for the lesson tests:
// bounded by `timeout 120`, stdout and stderr captured together.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace distlab::lessons::testing {

struct Outcome {
  int status = -1;     // exit code; -1 if killed by a signal
  std::string output;  // stdout and stderr
};

// `redirect` is appended to the command line (e.g. "< /dev/null": no
// terminal, as under CI).
inline Outcome run(const std::string& command, const std::string& redirect = "") {
  Outcome result;
  FILE* pipe = popen(("timeout 120 " + command + " " + redirect + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char chunk[4096];
  for (size_t n = 0; (n = fread(chunk, 1, sizeof chunk, pipe)) > 0;) result.output.append(chunk, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace distlab::lessons::testing
