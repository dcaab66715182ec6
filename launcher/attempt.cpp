#include "attempt.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "flight/exit_file.hpp"

namespace distlab::launcher {
namespace {

// After the last worker ended, its output is still read this long: a child
// it left behind may hold the pipe open, and is then killed.
constexpr std::chrono::milliseconds kDrainTime{1000};
// Reads of 64 KiB when a worker ended: more than its pipe can hold. While
// workers run, one read per stream and turn keeps a chatty worker from
// starving the others and the signals.
constexpr int kDrainReads = 64;

std::vector<std::string> env_lines(const comm::Environment& overrides) {
  comm::Environment env = comm::current_environment();
  for (const auto& [name, value] : overrides) env[name] = value;
  std::vector<std::string> lines;
  for (const auto& [name, value] : env) lines.push_back(name + "=" + value);
  return lines;
}

// The worker's whole process group; the worker alone if it left its group.
void signal_worker(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

int millis_until(std::chrono::steady_clock::time_point t) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - std::chrono::steady_clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, 60 * 60 * 1000));
}

}  // namespace

void say(const std::string& text) { write_all(STDERR_FILENO, "distlab-run: " + text + "\n"); }

Attempt::Attempt(const LaunchOptions& options, std::string program, int restart_count, int master_port,
                 flight::SignalPipe& signals)
    : options_(options),
      program_(std::move(program)),
      restart_count_(restart_count),
      master_port_(master_port),
      signals_(signals),
      exit_records_(options, restart_count) {}

Attempt::~Attempt() {
  for (auto& w : workers_) {
    if (w.running) {
      signal_worker(w.child.pid, SIGKILL);
      while (::waitpid(w.child.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    close_output(w);
  }
}

void Attempt::start_all() {
  std::vector<std::string> argv = options_.command;
  const bool forward_stdin = stdin_is_foreground_terminal();
  exit_records_.forget_earlier();
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    Worker w;
    w.rank = options_.rank_of(local);
    comm::Environment env = worker_environment(options_, local, restart_count_, master_port_);
    if (const std::string note = exit_records_.note_path(w.rank); !note.empty())
      env[flight::kFlightDirNoteVariable] = note;
    if (forward_stdin && w.rank == 0) {
      // Its stdin is a pipe, not a terminal: the variable tells a lesson
      // run with --step that a person answers there.
      w.stdin_pipe = std::make_unique<StdinForwarder>(STDIN_FILENO);
      env["DISTLAB_STEP_WAIT"] = "1";
    }
    w.child = start_child(program_, argv, env_lines(env), w.stdin_pipe ? w.stdin_pipe->worker_end() : -1);
    if (w.stdin_pipe) w.stdin_pipe->worker_started();
    std::string prefix = rank_prefix(w.rank, options_.prefix);
    w.out = std::make_unique<LinePrefixer>(prefix, [](const std::string& line) { write_all(STDOUT_FILENO, line); });
    w.err = std::make_unique<LinePrefixer>(prefix, [](const std::string& line) { write_all(STDERR_FILENO, line); });
    workers_.push_back(std::move(w));
  }
}

AttemptOutcome Attempt::run() {
  start_all();
  for (;;) {
    bool all_ended = running_count() == 0;
    if (all_ended && (!any_output_open() || Clock::now() >= drain_deadline_)) break;

    // Watch: the signal pipe, every open output pipe, then the terminal
    // (or rank 0's stdin pipe) while one is forwarded.
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<int*, LinePrefixer*>> streams;
    for (auto& w : workers_) {
      for (auto [fd, lines] : streams_of(w)) {
        if (*fd < 0) continue;
        fds.push_back({*fd, POLLIN, 0});
        streams.push_back({fd, lines});
      }
    }
    StdinForwarder* forwarder = nullptr;
    for (auto& w : workers_)
      if (w.stdin_pipe && w.stdin_pipe->poll_entry().fd >= 0) forwarder = w.stdin_pipe.get();
    if (forwarder != nullptr) fds.push_back(forwarder->poll_entry());
    int timeout = -1;
    if (all_ended)
      timeout = millis_until(drain_deadline_);
    else if (stopping_ && !killed_)
      timeout = millis_until(kill_deadline_);
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;

    for (size_t i = 0; i < streams.size(); ++i)
      if (fds[i + 1].revents != 0 && *streams[i].first >= 0) read_available(*streams[i].first, *streams[i].second, 1);
    if (forwarder != nullptr) forwarder->on_ready(fds.back().revents);
    for (int sig : signals_.take()) {
      if (sig == SIGCHLD)
        reap();
      else if (sig == SIGUSR1)
        ask_for_flight_records();
      else
        on_signal(sig);
    }
    if (stopping_ && !killed_ && running_count() > 0 && Clock::now() >= kill_deadline_) kill_stragglers();
  }

  for (auto& w : workers_) {
    // Whoever still holds the pipes is a leftover child of the worker.
    if (w.child.out_fd >= 0 || w.child.err_fd >= 0) signal_worker(w.child.pid, SIGKILL);
    close_output(w);
  }
  return outcome_;
}

void Attempt::on_signal(int sig) {
  if (outcome_.kind != AttemptOutcome::Kind::kInterrupted) {
    outcome_ = {AttemptOutcome::Kind::kInterrupted, outcome_.failure, sig};
    say("got " + signal_name(sig) + ", forwarding it to all workers");
    // Forward the same signal: a worker may treat Ctrl-C differently from
    // SIGTERM (save a checkpoint, print a summary).
    stop_all(sig);
  } else if (!killed_) {
    say("second signal, killing all workers now");
    kill_stragglers();
  }
}

// SIGUSR1: every worker writes its flight recorder's file and goes on
// (lib/flight): one `kill -USR1` to the launcher asks the whole node why it hangs.
void Attempt::ask_for_flight_records() {
  say("got SIGUSR1, asking every worker to write its flight recorder (flight.rank<N>.json)");
  for (auto& w : workers_)
    if (w.running) signal_worker(w.child.pid, SIGUSR1);
}

void Attempt::reap() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    for (auto& w : workers_)
      if (w.child.pid == pid && w.running) on_exit(w, status);
  }
}

void Attempt::on_exit(Worker& w, int wait_status) {
  w.running = false;
  w.stdin_pipe.reset();  // nobody reads it any more
  // What it wrote before ending comes before the launcher's report of it.
  for (auto [fd, lines] : streams_of(w))
    if (*fd >= 0) read_available(*fd, *lines, kDrainReads);
  if (running_count() == 0) drain_deadline_ = Clock::now() + kDrainTime;
  exit_records_.record(w.rank, w.child.pid, wait_status, /*asked_to_stop=*/stopping_);
  // Once stopping, the others' ends are the launcher's doing, not failures.
  if (wait_status_ok(wait_status) || stopping_) return;
  outcome_.kind = AttemptOutcome::Kind::kFailed;
  outcome_.failure = "rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.child.pid) + ") " +
                     describe_wait_status(wait_status);
  say(outcome_.failure);
  if (running_count() > 0) say("stopping the other workers on this node");
  stop_all(SIGTERM);
}

void Attempt::stop_all(int sig) {
  for (auto& w : workers_)
    if (w.running) signal_worker(w.child.pid, sig);
  if (stopping_) return;  // the first request's grace period stands
  stopping_ = true;
  kill_deadline_ = Clock::now() + std::chrono::milliseconds(options_.grace_ms);
}

void Attempt::kill_stragglers() {
  for (auto& w : workers_) {
    if (!w.running) continue;
    say("rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.child.pid) + ") still running " +
        std::to_string(options_.grace_ms) + " ms after being asked to stop; sending SIGKILL");
    signal_worker(w.child.pid, SIGKILL);
  }
  killed_ = true;
}

void Attempt::read_available(int& fd, LinePrefixer& lines, int max_reads) {
  char buffer[65536];
  for (int reads = 0; reads < max_reads; ++reads) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      lines.feed(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    lines.finish();  // end of stream (or an error, treated alike)
    ::close(fd);
    fd = -1;
    return;
  }
}

void Attempt::close_output(Worker& w) {
  for (auto [fd, lines] : streams_of(w)) {
    if (*fd < 0) continue;
    if (lines != nullptr) lines->finish();
    ::close(*fd);
    *fd = -1;
  }
}

std::array<std::pair<int*, LinePrefixer*>, 2> Attempt::streams_of(Worker& w) {
  return {{{&w.child.out_fd, w.out.get()}, {&w.child.err_fd, w.err.get()}}};
}

int Attempt::running_count() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
}

bool Attempt::any_output_open() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.child.out_fd >= 0 || w.child.err_fd >= 0; });
}

}  // namespace distlab::launcher
