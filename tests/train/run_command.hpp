// Runs a shell command with a deadline and its output (stdout and stderr
// together) captured, for the tests that start real programs.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/free_port.hpp"

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

// Runs make(port) with a port free a moment ago. On a shared machine
// another program may take it first: when the output says so, it tries again
// with another port, three times at most.
template <typename Make>
Outcome run_on_free_port(Make make, int seconds) {
  Outcome result;
  for (int attempt = 0; attempt < 3; ++attempt) {
    result = run_command(make(std::to_string(test_support::free_port())), seconds);
    if (result.output.find("Address already in use") == std::string::npos &&
        result.output.find("EADDRINUSE") == std::string::npos)
      break;
  }
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

// A new empty folder under the temporary directory, unique to this process.
inline std::string fresh_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("distlab_failover_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// `dir`, emptied: a retry on another port starts afresh.
inline std::string emptied(const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Every "final parameters digest 0x..." the ranks printed (lessons 09 and 11).
inline std::vector<std::string> digests(const std::string& output) {
  static const std::regex line(R"(final parameters digest (0x[0-9a-f]{8}))");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[1]);
  return found;
}

// The digest a run that is never interrupted prints: `command(port, dir)`
// run in a fresh folder `name`, which must succeed with `printers` digest
// lines, all equal. "none" when it did not.
template <typename Command>
std::string digest_of_run(const std::string& name, size_t printers, int seconds, Command command) {
  const std::string dir = fresh_dir(name);
  const Outcome r = run_on_free_port([&](const std::string& port) { return command(port, emptied(dir)); }, seconds);
  EXPECT_EQ(r.status, 0) << r.output;
  const auto found = digests(r.output);
  EXPECT_EQ(found.size(), printers) << r.output;
  for (const auto& d : found) EXPECT_EQ(d, found[0]) << r.output;
  EXPECT_EQ(r.output.find("resumed from"), std::string::npos) << r.output;  // it started afresh
  return found.empty() ? std::string("none") : found[0];
}

}  // namespace distlab::train::testing
