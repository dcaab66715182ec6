#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace distlab::launcher {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw LaunchError(std::string("cannot create a pipe: ") + std::strerror(errno));
}

// Between fork and exec only async-signal-safe calls: everything the child
// needs (argv, envp, the path) was built before fork.
[[noreturn]] void exec_in_child(pid_t launcher, const char* path, char* const argv[], char* const envp[], int in_read,
                                int out_write, int err_write, int report_write, const sigset_t& old_mask) {
  // Own group: Ctrl-C in a terminal reaches only the launcher, which forwards
  // it once to every worker; and a stop signal reaches the worker's children.
  ::setpgid(0, 0);
  // The kernel kills the worker when the launcher dies, even by SIGKILL. The
  // launcher may already have died before this line: check.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
  // SIGUSR1 asks for a flight dump (distlab-run forwards it): ignored until
  // the worker installs its handler (comm::run_job does), so a request in
  // its first moments, or to a program with no handler, does not kill it.
  ::signal(SIGUSR1, SIG_IGN);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  // A worker in a background process group would stop on reading the
  // terminal: it reads the launcher's pipe, or nothing.
  int in_fd = in_read >= 0 ? in_read : ::open("/dev/null", O_RDONLY);
  if (in_fd >= 0) ::dup2(in_fd, STDIN_FILENO);
  ::dup2(out_write, STDOUT_FILENO);
  ::dup2(err_write, STDERR_FILENO);
  ::execve(path, argv, envp);
  int error = errno;
  ssize_t ignored = ::write(report_write, &error, sizeof error);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

ChildProcess start_child(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env, int stdin_fd) {
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  int out[2], err[2], report[2];
  make_pipe(out);
  make_pipe(err);
  make_pipe(report);  // close-on-exec: stays empty when exec succeeds

  // No signal handler of the launcher may run in the child before it resets
  // them; the child unblocks after the reset.
  sigset_t all, old_mask;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &old_mask);
  pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0)
    exec_in_child(launcher, path.c_str(), c_argv.data(), c_env.data(), stdin_fd, out[1], err[1], report[1], old_mask);
  int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(out[1]);
  ::close(err[1]);
  ::close(report[1]);
  if (pid < 0) {
    for (int fd : {out[0], err[0], report[0]}) ::close(fd);
    throw LaunchError(std::string("cannot fork: ") + std::strerror(fork_errno));
  }
  // Set here as well as in the child, so signalling the group works at once.
  ::setpgid(pid, pid);

  int exec_errno = 0;
  ssize_t n;
  do n = ::read(report[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof exec_errno) {
    ::close(out[0]);
    ::close(err[0]);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw LaunchError("cannot run '" + path + "': " + std::strerror(exec_errno));
  }
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  return ChildProcess{pid, out[0], err[0]};
}

std::string find_program(const std::string& name, const std::string& path_var) {
  auto runnable = [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0; };
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), F_OK) != 0) throw LaunchError("cannot run '" + name + "': no such file");
    if (!runnable(name)) throw LaunchError("cannot run '" + name + "': not executable (chmod +x?)");
    return name;
  }
  size_t begin = 0;
  while (begin <= path_var.size()) {
    size_t colon = path_var.find(':', begin);
    std::string dir = path_var.substr(begin, colon == std::string::npos ? std::string::npos : colon - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate)) return candidate;
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  throw LaunchError("cannot run '" + name + "': not found in PATH (give a path such as ./" + name + ")");
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
  }
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return "was killed by " + signal_name(WTERMSIG(wait_status));
  return "ended with wait status " + std::to_string(wait_status);
}

bool wait_status_ok(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

}  // namespace distlab::launcher
