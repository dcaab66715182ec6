// Runs the built distlab-run as a user would, with its stdout and stderr
// captured, and never waits longer than the test allows.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace distlab::launcher::testing {

struct Finished {
  bool timed_out = false;
  int exit_code = -1;  // 128 + signal when the launcher itself was killed
  std::string out, err;
  double seconds = 0;  // from start to exit
};

class LauncherProcess {
 public:
  // distlab-run `args...`; its output goes to files in `dir`.
  LauncherProcess(const std::vector<std::string>& args, const std::string& dir);
  ~LauncherProcess();  // SIGKILL if still running
  LauncherProcess(const LauncherProcess&) = delete;
  LauncherProcess& operator=(const LauncherProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits at most `limit`; past it, kills the launcher and says so.
  Finished wait(std::chrono::milliseconds limit);

 private:
  pid_t pid_ = -1;
  std::string out_path_, err_path_;
  std::chrono::steady_clock::time_point started_;
};

// Runs and waits in one call.
Finished run_launcher(const std::vector<std::string>& args, std::chrono::milliseconds limit);

// A fresh empty directory under the test temp dir.
std::string fresh_dir(const std::string& name);
std::string read_file(const std::string& path);
std::vector<std::string> lines_of(const std::string& text);
// Waits until `path` exists, at most `limit`.
bool wait_for_file(const std::string& path, std::chrono::milliseconds limit);
// True when `pid` is gone (or a zombie nobody can be blamed for any more:
// an orphan waiting for init to reap it).
bool process_gone(pid_t pid);

}  // namespace distlab::launcher::testing
