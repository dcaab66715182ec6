// A stand-in for a training program, started by distlab-run in the launcher
// tests. Flags say what it does; everything it learns comes from the
// variables the launcher set.
//
//   --print-env          one line "env NAME=value ..." with the launcher's variables
//   --exit-code C        exit with C ...
//   --at-rank R          ... only at rank R (default: every rank)
//   --until-restart N    ... only while RESTART_COUNT < N
//   --fail-after-ms T    wait T ms before failing
//   --sleep-ms T         ranks that do not fail sleep T ms, then exit 0
//   --record DIR         write DIR/started.RANK.RESTART (its pid) at start and
//                        DIR/signal.RANK.RESTART (the number) on SIGINT/SIGTERM
//   --ignore-sigterm     keep running on SIGTERM (still recorded)
//   --lines N            print N lines of 200 characters through stdio
//   --partial            end stdout with a line that has no '\n'
//   --stderr             print one line to stderr
//   --rendezvous         meet at MASTER_ADDR:MASTER_PORT: rank 0 listens and
//                        every other rank sends it its rank (10 s at most)
//   --stdin              print "stdin RANK: terminal|pipe|/dev/null|other
//                        DISTLAB_STEP_WAIT=value"
//   --read-stdin         print each line read from stdin ("rank R read: ...")
//                        until end of input ("rank R read: end of input")
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

int env_int(const char* name) { return std::atoi(env(name).c_str()); }

std::string g_record_dir;
std::string g_signal_path;
bool g_ignore_sigterm = false;

// Whole or not at all: a test polling for the file never reads it half written.
void write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen((path + ".tmp").c_str(), "w");
  if (f == nullptr) return;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::rename((path + ".tmp").c_str(), path.c_str());
}

std::string record_name(const std::string& what) {
  return g_record_dir + "/" + what + "." + env("RANK") + "." + env("RESTART_COUNT");
}

void on_stop_signal(int sig) {
  // Only async-signal-safe calls here; the file name was built in main.
  if (!g_signal_path.empty()) {
    char text[2] = {static_cast<char>('0' + sig / 10), static_cast<char>('0' + sig % 10)};
    int n = sig < 10 ? 1 : 2;
    int fd = ::open(g_signal_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, sig < 10 ? text + 1 : text, n);
      (void)ignored;
      ::close(fd);
    }
  }
  if (sig == SIGTERM && g_ignore_sigterm) return;
  ::_exit(128 + sig);
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

sockaddr_in master_address() {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(env("MASTER_ADDR").c_str(), env("MASTER_PORT").c_str(), &hints, &found) != 0) {
    std::fprintf(stderr, "rendezvous: cannot resolve %s\n", env("MASTER_ADDR").c_str());
    std::exit(20);
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  return addr;
}

// Rank 0 accepts WORLD_SIZE-1 connections, each sending its rank as text.
int rendezvous() {
  int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  sockaddr_in addr = master_address();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  if (rank == 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0) {
      std::printf("rendezvous: cannot listen on port %s: %s\n", env("MASTER_PORT").c_str(), std::strerror(errno));
      return 21;
    }
    std::set<int> joined;
    while (static_cast<int>(joined.size()) < world - 1) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1) {
        std::printf("rendezvous: timed out with %zu of %d ranks\n", joined.size(), world - 1);
        return 22;
      }
      int c = ::accept(fd, nullptr, nullptr);
      char buffer[16] = {};
      ssize_t n = ::recv(c, buffer, sizeof buffer - 1, MSG_WAITALL);
      if (n > 0) joined.insert(std::atoi(buffer));
      ::close(c);
    }
    ::close(fd);
    std::string list;
    for (int r : joined) list += (list.empty() ? "" : ",") + std::to_string(r);
    std::printf("rendezvous: ranks %s joined rank 0 on port %s\n", list.c_str(), env("MASTER_PORT").c_str());
    return 0;
  }
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      std::string text = std::to_string(rank);
      ssize_t ignored = ::send(fd, text.data(), text.size(), 0);
      (void)ignored;
      ::close(fd);
      std::printf("rendezvous: rank %d reached rank 0\n", rank);
      return 0;
    }
    ::close(fd);
    sleep_ms(20);
  }
  std::printf("rendezvous: rank %d could not reach rank 0\n", rank);
  return 23;
}

// What this process's stdin is.
std::string stdin_kind() {
  if (::isatty(STDIN_FILENO) == 1) return "terminal";
  struct stat in {}, null {};
  if (::fstat(STDIN_FILENO, &in) != 0) return "closed";
  if (S_ISFIFO(in.st_mode)) return "pipe";
  if (S_ISCHR(in.st_mode) && ::stat("/dev/null", &null) == 0 && in.st_rdev == null.st_rdev) return "/dev/null";
  return "other";
}

void read_stdin(int rank) {
  char line[4096];
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    line[std::strcspn(line, "\n")] = '\0';
    std::printf("rank %d read: %s\n", rank, line);
    std::fflush(stdout);
  }
  std::printf("rank %d read: end of input\n", rank);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0, at_rank = -1, until_restart = 1 << 30, fail_after_ms = 0, sleep_for = 0, lines = 0;
  bool print_env = false, partial = false, to_stderr = false, meet = false, show_stdin = false, read_in = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--print-env")
      print_env = true;
    else if (a == "--exit-code")
      exit_code = next();
    else if (a == "--at-rank")
      at_rank = next();
    else if (a == "--until-restart")
      until_restart = next();
    else if (a == "--fail-after-ms")
      fail_after_ms = next();
    else if (a == "--sleep-ms")
      sleep_for = next();
    else if (a == "--record" && i + 1 < argc)
      g_record_dir = argv[++i];
    else if (a == "--ignore-sigterm")
      g_ignore_sigterm = true;
    else if (a == "--lines")
      lines = next();
    else if (a == "--partial")
      partial = true;
    else if (a == "--stderr")
      to_stderr = true;
    else if (a == "--rendezvous")
      meet = true;
    else if (a == "--stdin")
      show_stdin = true;
    else if (a == "--read-stdin")
      read_in = true;
    else {
      std::fprintf(stderr, "test_worker: unknown flag %s\n", a.c_str());
      return 64;
    }
  }
  int rank = env_int("RANK");
  // Handlers first: a test that saw the started file may signal at once.
  if (!g_record_dir.empty()) g_signal_path = record_name("signal");
  signal(SIGINT, on_stop_signal);
  signal(SIGTERM, on_stop_signal);
  if (!g_record_dir.empty()) write_file(record_name("started"), std::to_string(::getpid()));

  if (print_env) {
    std::printf("env");
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                             "MASTER_ADDR", "MASTER_PORT", "RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT",
                             "TORCHELASTIC_MAX_RESTARTS", "DISTLAB_LAUNCHER", "DISTLAB_TIMEOUT_MS"})
      std::printf(" %s=%s", name, env(name).c_str());
    std::printf("\n");
  }
  if (show_stdin)
    std::printf("stdin %d: %s DISTLAB_STEP_WAIT=%s\n", rank, stdin_kind().c_str(), env("DISTLAB_STEP_WAIT").c_str());
  // Through stdio's buffer on a pipe: flushed in 4 KiB blocks that cut lines.
  for (int i = 0; i < lines; ++i) std::printf("line %d %d %s\n", rank, i, std::string(200, 'a' + rank % 26).c_str());
  if (to_stderr) std::fprintf(stderr, "to stderr from %d\n", rank);
  std::fflush(stdout);

  if (read_in) read_stdin(rank);
  if (meet) {
    int rc = rendezvous();
    std::fflush(stdout);
    if (rc != 0) return rc;
  }
  bool fails = exit_code != 0 && (at_rank < 0 || at_rank == rank) && env_int("RESTART_COUNT") < until_restart;
  if (fails) {
    sleep_ms(fail_after_ms);
    std::printf("failing with code %d\n", exit_code);
    std::fflush(stdout);
    return exit_code;
  }
  sleep_ms(sleep_for);
  if (partial) std::printf("partial %d", rank);
  return 0;
}
