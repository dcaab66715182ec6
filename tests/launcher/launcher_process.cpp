#include "launcher_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace distlab::launcher::testing {

LauncherProcess::LauncherProcess(const std::vector<std::string>& args, const std::string& dir)
    : out_path_(dir + "/launcher.out"), err_path_(dir + "/launcher.err") {
  std::vector<std::string> argv{DISTLAB_RUN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  started_ = std::chrono::steady_clock::now();
  int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
}

LauncherProcess::~LauncherProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

Finished LauncherProcess::wait(std::chrono::milliseconds limit) {
  Finished f;
  auto deadline = started_ + limit;
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      f.timed_out = true;
      ::kill(pid_, SIGKILL);  // its workers die with it (PR_SET_PDEATHSIG)
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  f.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  f.out = read_file(out_path_);
  f.err = read_file(err_path_);
  return f;
}

Finished run_launcher(const std::vector<std::string>& args, std::chrono::milliseconds limit) {
  std::string dir = fresh_dir("run");
  return LauncherProcess(args, dir).wait(limit);
}

std::string fresh_dir(const std::string& name) {
  static std::atomic<int> counter{0};  // tests start launchers from several threads at once (ThreadSanitizer)
  std::string dir = ::testing::TempDir() + "distlab_launcher_" + std::to_string(::getpid()) + "_" + name + "_" +
                    std::to_string(counter.fetch_add(1));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool wait_for_file(const std::string& path, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

}  // namespace distlab::launcher::testing
