#include "terminal_process.hpp"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace distlab::launcher::testing {

TerminalProcess::TerminalProcess(const std::vector<std::string>& argv) {
  std::vector<char*> c_argv;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  // forkpty: a new session whose controlling terminal is the pty's slave,
  // on the child's stdin, stdout and stderr.
  pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
  if (pid_ < 0) throw std::runtime_error("forkpty failed");
  if (pid_ == 0) {
    ::execv(c_argv[0], c_argv.data());
    ::_exit(127);
  }
}

TerminalProcess::~TerminalProcess() {
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (master_ >= 0) ::close(master_);
}

int TerminalProcess::read_some(int timeout_ms) {
  if (master_ < 0) return -1;
  pollfd p{master_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return 0;
  char buffer[4096];
  ssize_t n = ::read(master_, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return 0;
  if (n <= 0) {  // EIO: every process holding the terminal has closed it
    ::close(master_);
    master_ = -1;
    return -1;
  }
  for (ssize_t i = 0; i < n; ++i)
    if (buffer[i] != '\r') output_ += buffer[i];
  return static_cast<int>(n);
}

bool TerminalProcess::wait_for(const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (output_.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (read_some(20) < 0 && output_.find(text) == std::string::npos) return false;
  }
  return true;
}

void TerminalProcess::read_for(std::chrono::milliseconds duration) {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline)
    if (read_some(20) < 0) return;
}

void TerminalProcess::type(const std::string& text) {
  if (master_ < 0) return;
  ssize_t ignored = ::write(master_, text.data(), text.size());
  (void)ignored;
}

bool TerminalProcess::running() {
  if (reaped_) return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

int TerminalProcess::wait_exit(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      reaped_ = true;
      return -1;
    }
    read_some(20);
  }
  while (read_some(50) > 0) {  // what is left in the terminal after the exit
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

}  // namespace distlab::launcher::testing
