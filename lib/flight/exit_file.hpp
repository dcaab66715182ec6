// How a worker process ended, as its launcher saw it: flight.rank<N>.exit.json,
// written by distlab-run beside the workers' flight files when a worker
// exits abnormally (a non-zero code, or killed by a signal). A rank killed
// by SIGKILL writes no flight file of its own; this file is then the only
// place that says how it went, and distlab-trace why (why.hpp) reads it.
// Written whole to a temporary name and renamed, like the dumps. Without a
// launcher that writes it (torchrun, mpirun) the diagnosis does without.
// The form is documented in launcher/README.md ("Flight recorder").
#pragma once

#include <cstdint>
#include <string>

namespace distlab::flight {

inline constexpr int kExitVersion = 1;

struct ExitRecord {
  int version = kExitVersion;
  int rank = 0;            // job-wide
  int world_size = 1;
  int pid = 0;
  std::string host;        // the launcher's host, which is the worker's
  int restart = 0;         // the launcher's attempt: 0 = first start
  int exit_code = 0;       // as a shell reports it: the code, or 128 + the signal
  std::string signal;      // "SIGKILL", "signal 42", or "" when it exited by itself
  bool asked_to_stop = false;  // the launcher had already asked it to stop (another rank failed, Ctrl-C)
  int64_t unix_us = 0;     // wall clock when the launcher saw it end
};

// "killed by SIGKILL, exit 137", "exit 3"
std::string describe(const ExitRecord& record);

// "<dir>/flight.rank<N>.exit.json"
std::string exit_path(const std::string& dir, int rank);
// True for a name of the form flight.rank<N>.exit.json (any directory).
bool is_exit_path(const std::string& path);
// Atomic, like write_dump. Throws std::runtime_error naming the path.
void write_exit(const ExitRecord& record, const std::string& path);
// Throws BadDump (dump_file.hpp) naming the file and what is wrong, in one line.
ExitRecord read_exit(const std::string& path);

// The records belong beside the worker's flight files, and a program may
// choose that folder itself after it started (lesson 14's --flight-dir),
// where the launcher cannot see it. So distlab-run names a file per worker
// in DISTLAB_FLIGHT_DIR_NOTE; the worker's flight recorder writes its folder
// there (note_flight_dir) and the launcher reads it (noted_flight_dir).
inline constexpr const char* kFlightDirNoteVariable = "DISTLAB_FLIGHT_DIR_NOTE";
// Writes `dir`, made absolute, into the file DISTLAB_FLIGHT_DIR_NOTE names,
// when it is set. Never throws: without the note the launcher goes by its
// own rule.
void note_flight_dir(const std::string& dir);
// The folder written into `note_path`; "" when there is none.
std::string noted_flight_dir(const std::string& note_path);

}  // namespace distlab::flight
