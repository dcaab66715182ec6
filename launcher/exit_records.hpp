// distlab-run's half of the flight recorder: when a worker ends abnormally
// (a non-zero code, or killed by a signal), the launcher writes how, as
// flight.rank<N>.exit.json (lib/flight/exit_file.hpp), into the directory
// the workers write their flight files to: the one each worker noted when
// its recorder started, else the one found by the workers' rule. A rank killed by SIGKILL leaves
// no file of its own; with this one, distlab-trace why still says "rank 2
// left the job (killed by SIGKILL, exit 137)".
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "options.hpp"

namespace distlab::launcher {

// The workers' flight directory by their own rule (flight::files_dir):
// DISTLAB_FLIGHT_DIR, else the directory of the trace file the program is
// given (its --trace FILE or --trace=FILE, else DISTLAB_TRACE), else ".".
// `command` is the program and its arguments.
std::string workers_flight_dir(const std::vector<std::string>& command);

class ExitRecords {
 public:
  // Nothing is written when DISTLAB_FLIGHT_ENTRIES=0 turns the recorder off.
  ExitRecords(const LaunchOptions& options, int restart_count);
  // Removes the workers' notes (flight/exit_file.hpp, note_flight_dir).
  ~ExitRecords();
  ExitRecords(const ExitRecords&) = delete;
  ExitRecords& operator=(const ExitRecords&) = delete;

  const std::string& dir() const { return dir_; }
  // Where `rank`'s worker notes its flight directory (DISTLAB_FLIGHT_DIR_NOTE);
  // "" when the records are off or no folder for notes could be made.
  std::string note_path(int rank) const;
  // The directory `rank`'s records go to: the one its worker noted, else dir().
  std::string dir_of(int rank) const;
  // Removes this node's ranks' records of an earlier attempt or job, so
  // that what is there describes this attempt only.
  void forget_earlier() const;
  // Writes `rank`'s record for `wait_status` (waitpid's) when it is not a
  // clean exit. Never throws: a failure is one launcher line.
  void record(int rank, pid_t pid, int wait_status, bool asked_to_stop) const;

 private:
  const LaunchOptions& options_;
  int restart_count_;
  bool on_;
  std::string dir_;
  std::string notes_;  // a private temporary folder, this attempt's only
};

}  // namespace distlab::launcher
