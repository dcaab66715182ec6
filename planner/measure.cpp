#include "measure.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

namespace distlab::planner {

namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The last line that says something (CLI11 ends a refused flag with a
// pointer to --help after the line naming the flag).
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line.rfind("Run with --help", 0) != 0) last = line;
  return last;
}

}  // namespace

std::vector<double> steps_from_log(const std::string& log, int warmup) {
  // "[RANK 3]: | epoch   1 |     4/    8 batches | lr 5.00 | ms/batch 12.34 | ..."
  static const std::regex line(R"(\|\s*(\d+)/\s*\d+ batches \|.*ms/batch\s+([0-9.]+))");
  std::map<int, double> slowest;
  std::istringstream in(log);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (!std::regex_search(text, m, line)) continue;
    const int step = std::stoi(m[1]);
    slowest[step] = std::max(slowest[step], std::stod(m[2]) / 1000);
  }
  std::vector<double> out;
  for (const auto& [step, seconds] : slowest)
    if (step > warmup) out.push_back(seconds);
  return out;
}

int64_t metered_bytes_from_log(const std::string& log) {
  static const std::regex line(R"(\]: memory: peak (\d+) bytes allocated)");
  std::smatch m;
  if (!std::regex_search(log, m, line)) return -1;
  return std::stoll(m[1]);
}

std::string default_capstone(const char* argv0) {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv0);
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  return folder + "/../lessons/lesson_11_capstone";
}

Measured measure(const std::string& command, const MeasureOptions& o) {
  std::vector<std::string> args = words(command);
  args[0] = o.capstone;
  const int total = o.warmup + o.steps;
  for (const std::string& extra :
       {std::string("--epochs"), std::string("1"), std::string("--batches-per-epoch"), std::to_string(total + 1),
        std::string("--eval-batches"), std::string("1"), std::string("--log-interval"), std::string("1"),
        std::string("--stop-after"), std::to_string(total), std::string("--meter-memory")})
    args.push_back(extra);
  if (!o.data.empty()) args.insert(args.end(), {"--data", o.data});

  Measured out;
  int pipe_out[2];
  if (pipe(pipe_out) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    out.error = std::string("fork: ") + std::strerror(errno);
    return out;
  }
  if (pid == 0) {
    dup2(pipe_out[1], 1);
    dup2(pipe_out[1], 2);
    close(pipe_out[0]);
    close(pipe_out[1]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(pipe_out[1]);
  std::string log;
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  for (;;) {
    pollfd fd{pipe_out[0], POLLIN, 0};
    const int ready = poll(&fd, 1, 200);
    if (ready > 0) {
      char buffer[4096];
      const ssize_t n = read(pipe_out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      log.append(buffer, static_cast<size_t>(n));
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > o.timeout_s) {
      kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
  }
  close(pipe_out[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  out.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  if (timed_out) {
    out.error = "stopped after " + std::to_string(static_cast<int>(o.timeout_s)) + " s (--timeout)";
    return out;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.error = last_line(log);
    if (out.error.empty()) out.error = "exit status " + std::to_string(status);
    return out;
  }
  out.step_s = steps_from_log(log, o.warmup);
  out.metered_bytes = metered_bytes_from_log(log);
  if (out.metered_bytes < 0) {
    out.error = "no memory line in its log (--meter-memory): " + last_line(log);
    return out;
  }
  if (out.step_s.empty()) {
    out.error = "no ms/batch lines in its log: " + last_line(log);
    return out;
  }
  std::vector<double> sorted = out.step_s;
  std::sort(sorted.begin(), sorted.end());
  out.median_s = sorted[sorted.size() / 2];
  out.low_s = sorted.front();
  out.high_s = sorted.back();
  out.ok = true;
  return out;
}

}  // namespace distlab::planner
