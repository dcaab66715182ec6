#include "measure.hpp"

#include <poll.h>
#include <signal.h>
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

// The folder a path names a file in ("." for a bare name).
std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The last line that says something (CLI11 ends a refused flag with a
// pointer to --help after the line naming the flag; distlab-run ends a
// failed job with its own lines after the rank's).
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  auto says = [](const std::string& l) {
    return !l.empty() && l.find("Run with --help") == std::string::npos && l.rfind("distlab-run: ", 0) != 0;
  };
  while (std::getline(in, line))
    if (says(line)) last = line;
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

int64_t resident_bytes_from_log(const std::string& log) {
  static const std::regex line(R"(\]: memory: peak \d+ bytes allocated.*; resident peak (-?\d+) bytes)");
  std::smatch m;
  if (!std::regex_search(log, m, line)) return -1;
  return std::stoll(m[1]);
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
  const std::string path = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv0);
  return folder_of(path) + "/../lessons/lesson_11_capstone";
}

namespace {

// `args` run as a child process, its stdout and stderr read together,
// killed past `timeout_s`.
struct ChildRun {
  bool ok = false;
  std::string log, error;
};
ChildRun run_child(std::vector<std::string> args, double timeout_s) {
  ChildRun out;
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
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  for (;;) {
    pollfd fd{pipe_out[0], POLLIN, 0};
    const int ready = poll(&fd, 1, 200);
    if (ready > 0) {
      char buffer[4096];
      const ssize_t n = read(pipe_out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      out.log.append(buffer, static_cast<size_t>(n));
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
      kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
  }
  close(pipe_out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    out.error = "stopped after " + std::to_string(static_cast<int>(timeout_s)) + " s (--timeout)";
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.error = last_line(out.log);
    if (out.error.empty()) out.error = "exit status " + std::to_string(status);
  } else {
    out.ok = true;
  }
  return out;
}

// lesson 11's flags for a run of `steps` steps with the meter on.
std::vector<std::string> run_flags(int steps, const MeasureOptions& o) {
  std::vector<std::string> flags = {"--epochs", "1", "--batches-per-epoch", std::to_string(steps + 1),
                                    "--eval-batches", "1", "--log-interval", "1",
                                    "--stop-after", std::to_string(steps), "--meter-memory"};
  if (!o.data.empty()) flags.insert(flags.end(), {"--data", o.data});
  return flags;
}

// The steps' median, lowest and highest; ok.
void set_spread(Measured& m) {
  std::vector<double> sorted = m.step_s;
  std::sort(sorted.begin(), sorted.end());
  m.median_s = sorted[sorted.size() / 2];
  m.low_s = sorted.front();
  m.high_s = sorted.back();
  m.ok = true;
}

}  // namespace

Measured measure(const std::string& command, const MeasureOptions& o) {
  std::vector<std::string> args = words(command);
  args[0] = o.capstone;
  for (const std::string& flag : run_flags(o.warmup + o.steps, o)) args.push_back(flag);
  Measured out;
  const ChildRun child = run_child(args, o.timeout_s);
  if (!child.ok) {
    out.error = child.error;
    return out;
  }
  const std::string& log = child.log;
  out.step_s = steps_from_log(log, o.warmup);
  out.metered_bytes = metered_bytes_from_log(log);
  out.peak_rss_bytes = std::max<int64_t>(0, resident_bytes_from_log(log));
  if (out.metered_bytes < 0) {
    out.error = "no memory line in its log (--meter-memory): " + last_line(log);
    return out;
  }
  if (out.step_s.empty()) {
    out.error = "no ms/batch lines in its log: " + last_line(log);
    return out;
  }
  set_spread(out);
  return out;
}

Measured combine(const std::vector<Measured>& runs) {
  Measured out;
  for (const Measured& run : runs) {
    if (!run.ok) return run;
    out.step_s.insert(out.step_s.end(), run.step_s.begin(), run.step_s.end());
    out.metered_bytes = std::max(out.metered_bytes, run.metered_bytes);
    out.peak_rss_bytes = std::max(out.peak_rss_bytes, run.peak_rss_bytes);
  }
  if (out.step_s.empty()) {
    out.error = "no runs";
    return out;
  }
  set_spread(out);
  return out;
}

std::vector<int64_t> rank_bytes_from_log(const std::string& log, int ranks) {
  // "[rank 2] [RANK 2]: memory: peak 24299548 bytes allocated on the CPU (the allocator meter, this rank's process)"
  static const std::regex line(R"(\[RANK (\d+)\]: memory: peak (\d+) bytes allocated)");
  std::vector<int64_t> out(static_cast<size_t>(ranks), -1);
  std::istringstream in(log);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (!std::regex_search(text, m, line)) continue;
    const long rank = std::stol(m[1]);
    if (rank >= 0 && rank < ranks) out[static_cast<size_t>(rank)] = std::stoll(m[2]);
  }
  return out;
}

RankPeaks measure_rank_memory(const std::string& command, int ranks, const MeasureOptions& o) {
  // A free port of its own: another job on this machine (a second
  // benchmark, a lesson) never meets this one's ranks.
  std::vector<std::string> args = {o.launcher, "--nproc-per-node", std::to_string(ranks), "--master-port", "0", "--"};
  std::vector<std::string> lesson = words(command);
  lesson[0] = o.capstone;
  args.insert(args.end(), lesson.begin(), lesson.end());
  args.insert(args.end(), {"--backend", "gloo"});
  for (const std::string& flag : run_flags(2, o)) args.push_back(flag);
  RankPeaks out;
  const ChildRun child = run_child(args, o.timeout_s);
  if (!child.ok) {
    out.error = child.error;
    return out;
  }
  out.bytes = rank_bytes_from_log(child.log, ranks);
  for (size_t r = 0; r < out.bytes.size(); ++r)
    if (out.bytes[r] < 0) {
      out.error = "rank " + std::to_string(r) + " printed no memory line: " + last_line(child.log);
      return out;
    }
  out.ok = true;
  return out;
}

std::string default_launcher(const std::string& capstone) { return folder_of(capstone) + "/../launcher/distlab-run"; }

}  // namespace distlab::planner
