// Helpers shared by the visualizer's tests.
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "trace/chrome_json.hpp"
#include "trace/event.hpp"

namespace distlab::viz::testing_util {

inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "distlab_viz_" + std::to_string(getpid()) + "_" + name;
}

// Writes events the way every lesson does: through the library's sink.
inline void write_with_library(const std::string& path, const std::vector<trace::Event>& events) {
  trace::ChromeJsonSink sink(path);
  for (const auto& e : events) sink.write(e);
  sink.close();
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Every field of an event in one line; arguments sorted, because a JSON
// object has no order. Equal events give equal text, and a failing
// comparison prints both.
inline std::string describe(const trace::Event& e) {
  auto args = e.args;
  std::sort(args.begin(), args.end());
  std::ostringstream out;
  out << "rank " << e.rank << " lane '" << e.lane << "' name '" << e.name << "' cat '" << e.category << "' ["
      << e.begin_us << ", " << e.end_us << "] bytes " << e.bytes << " peer " << e.peer << " flow " << e.flow;
  for (const auto& [key, value] : args) out << " " << key << "='" << value << "'";
  return out.str();
}

inline void expect_same_event(const trace::Event& a, const trace::Event& b) { EXPECT_EQ(describe(a), describe(b)); }

}  // namespace distlab::viz::testing_util

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

extern char** environ;

namespace distlab::viz::testing_util {

// Starts `argv` with `extra_env` ("NAME=value") added to this environment;
// stdout and stderr go to `output_path` when given.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                   const std::string& output_path = "") {
  std::vector<std::string> env_text = extra_env;
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  std::vector<char*> env;
  for (auto& s : env_text) env.push_back(s.data());
  env.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> arg;
  for (auto& s : args) arg.push_back(s.data());
  arg.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!output_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, arg[0], &actions, nullptr, arg.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// The exit code, or -1 after killing it when it ran past `timeout_ms`.
inline int wait_exit(pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs to completion; returns the exit code and fills `output`.
inline int run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, std::string* output,
               int timeout_ms = 120000) {
  const std::string out_path = temp_path("run_output.txt");
  const pid_t pid = spawn(argv, extra_env, out_path);
  if (pid < 0) return -2;
  const int code = wait_exit(pid, timeout_ms);
  if (output != nullptr) *output = read_text(out_path);
  return code;
}

}  // namespace distlab::viz::testing_util
