// Runs a shell command with a deadline and its output (stdout and stderr
// together) captured, for the tests that start real programs.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace distlab::train::testing {

struct Outcome {
  int status = -1;  // exit code; 124 when the deadline killed it; -1 killed by a signal
  std::string output;
};

// `seconds` is a hard limit (coreutils timeout, then SIGKILL 5 s later).
inline Outcome run_command(const std::string& command, int seconds) {
  Outcome result;
  const std::string line = "timeout -k 5 " + std::to_string(seconds) + " sh -c '" + command + "' 2>&1";
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  char chunk[4096];
  size_t n = 0;
  while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0) result.output.append(chunk, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline bool contains(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace distlab::train::testing
