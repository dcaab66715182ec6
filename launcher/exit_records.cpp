// distlab-run's exit records (exit_records.hpp): the workers' flight
// directory found by their rule, and one record per abnormal end.
#include "exit_records.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "attempt.hpp"
#include "child_process.hpp"
#include "flight/exit_file.hpp"
#include "flight/recorder.hpp"

namespace distlab::launcher {

std::string workers_flight_dir(const std::vector<std::string>& command) {
  std::string trace;
  for (size_t i = 1; i < command.size(); ++i) {
    if (command[i] == "--trace" && i + 1 < command.size())
      trace = command[++i];
    else if (command[i].rfind("--trace=", 0) == 0)
      trace = command[i].substr(8);
  }
  if (trace.empty())
    if (const char* env = std::getenv("DISTLAB_TRACE")) trace = env;
  return flight::files_dir(trace);
}

namespace {
bool recorder_on() {
  try {
    return flight::RecorderOptions::from_env().entries > 0;
  } catch (const std::exception&) {
    return true;  // a bad value: the workers refuse it and say so
  }
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// "" when none can be made: the records then go by the workers' rule alone.
std::string make_notes_folder() {
  std::error_code error;
  std::string pattern = (std::filesystem::temp_directory_path(error) / "distlab-run.XXXXXX").string();
  if (error) return "";
  return mkdtemp(pattern.data()) != nullptr ? pattern : "";
}
}  // namespace

ExitRecords::ExitRecords(const LaunchOptions& options, int restart_count)
    : options_(options),
      restart_count_(restart_count),
      on_(recorder_on()),
      dir_(workers_flight_dir(options.command)),
      notes_(on_ ? make_notes_folder() : "") {}

ExitRecords::~ExitRecords() {
  std::error_code ignored;
  if (!notes_.empty()) std::filesystem::remove_all(notes_, ignored);
}

std::string ExitRecords::note_path(int rank) const {
  return notes_.empty() ? "" : notes_ + "/rank" + std::to_string(rank);
}

std::string ExitRecords::dir_of(int rank) const {
  const std::string noted = notes_.empty() ? "" : flight::noted_flight_dir(note_path(rank));
  return noted.empty() ? dir_ : noted;
}

void ExitRecords::forget_earlier() const {
  if (!on_) return;
  for (int local = 0; local < options_.nproc_per_node; ++local)
    std::remove(flight::exit_path(dir_, options_.rank_of(local)).c_str());
}

void ExitRecords::record(int rank, pid_t pid, int wait_status, bool asked_to_stop) const {
  if (!on_ || wait_status_ok(wait_status)) return;
  flight::ExitRecord r;
  r.rank = rank;
  r.world_size = options_.world_size();
  r.pid = static_cast<int>(pid);
  r.host = host_name();
  r.restart = restart_count_;
  if (WIFSIGNALED(wait_status)) {
    r.signal = signal_name(WTERMSIG(wait_status));
    r.exit_code = 128 + WTERMSIG(wait_status);
  } else {
    r.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 255;
  }
  r.asked_to_stop = asked_to_stop;
  r.unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  try {
    flight::write_exit(r, flight::exit_path(dir_of(rank), rank));
  } catch (const std::exception& e) {
    say("rank " + std::to_string(rank) + "'s exit record for distlab-trace why: " + e.what());
  }
}

}  // namespace distlab::launcher
