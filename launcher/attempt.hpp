// One start of all workers on this node, watched until every one has ended:
//   start all -> poll(output, signals, the terminal for rank 0) -> first
//   failure or Ctrl-C: stop all (SIGTERM or the forwarded signal, SIGKILL
//   after the grace period). Every abnormal end is written down for
//   distlab-trace why (exit_records.hpp).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "exit_records.hpp"
#include "line_prefixer.hpp"
#include "options.hpp"
#include "flight/signal_pipe.hpp"
#include "stdin_forwarder.hpp"

namespace distlab::launcher {

struct AttemptOutcome {
  enum class Kind { kSucceeded, kFailed, kInterrupted };
  Kind kind = Kind::kSucceeded;
  std::string failure;  // "rank 2 (pid 812) exited with code 3"
  int signal = 0;       // kInterrupted: the signal the launcher got
};

class Attempt {
 public:
  // `program` from find_program; `restart_count` 0 for the first start.
  Attempt(const LaunchOptions& options, std::string program, int restart_count, int master_port, flight::SignalPipe& signals);
  ~Attempt();  // kills whatever still runs, e.g. when starting threw

  // Throws LaunchError when the program cannot be executed.
  AttemptOutcome run();

 private:
  using Clock = std::chrono::steady_clock;
  struct Worker {
    int rank = 0;
    ChildProcess child;
    std::unique_ptr<LinePrefixer> out, err;
    std::unique_ptr<StdinForwarder> stdin_pipe;  // global rank 0 with a terminal only
    bool running = true;
  };

  void start_all();
  void ask_for_flight_records();
  void on_signal(int sig);
  void reap();
  void on_exit(Worker& w, int wait_status);
  void stop_all(int sig);
  void kill_stragglers();
  void read_available(int& fd, LinePrefixer& lines, int max_reads);
  void close_output(Worker& w);
  // (fd, its line cutter) for stdout and stderr
  static std::array<std::pair<int*, LinePrefixer*>, 2> streams_of(Worker& w);
  int running_count() const;
  bool any_output_open() const;

  const LaunchOptions& options_;
  std::string program_;
  int restart_count_;
  int master_port_;
  flight::SignalPipe& signals_;
  ExitRecords exit_records_;  // flight.rank<N>.exit.json for distlab-trace why
  std::vector<Worker> workers_;

  AttemptOutcome outcome_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_deadline_;
  Clock::time_point drain_deadline_;
};

// A launcher message on stderr: "distlab-run: <text>".
void say(const std::string& text);

}  // namespace distlab::launcher
