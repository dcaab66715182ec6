// Lesson 14 on processes: asking a silent rank for its flight record.
//
// A rank writes its file when one of its waits fails, when it is stopped
// (SIGTERM), or on SIGUSR1. A rank that skipped a collective and is busy
// elsewhere does none of these until its launcher stops it, which may come
// seconds after the others failed (torchrun's agent looks at its workers
// every 5 s), or never. So each process rank leaves DIR/flight.rank<R>.pid
// ("<pid> <host>") at its start, and the rank that reports sends SIGUSR1 to
// a rank of its machine that has written no file: the flight recorder
// writes it and the rank goes on, as `kill -USR1 <pid>` by hand would. A
// rank whose process is gone (SIGKILLed: a zombie, or reaped) never writes
// one, and need not be waited for.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace distlab::lesson14 {

inline std::string pid_path(const std::string& dir, int rank) {
  return dir + "/flight.rank" + std::to_string(rank) + ".pid";
}

inline std::string this_host() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// Written whole under another name, then renamed: a reader finds it whole or not at all.
inline void write_pid_file(const std::string& dir, int rank) {
  const std::string path = pid_path(dir, rank), temporary = path + ".tmp";
  std::ofstream(temporary, std::ios::trunc) << getpid() << " " << this_host() << "\n";
  std::error_code ignored;
  std::filesystem::rename(temporary, path, ignored);
}

enum class Asked {
  kAsked,    // SIGUSR1 sent: its file follows
  kGone,     // its process has ended: no file will come
  kUnknown,  // no pid file, another machine, or another program under that pid
};

namespace detail {
inline std::string exe_of(const std::string& pid) {
  char target[PATH_MAX] = {};
  const ssize_t n = readlink(("/proc/" + pid + "/exe").c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : "";
}
}  // namespace detail

// Asks `rank` (of a job whose ranks left pid files in `dir`) for its flight
// file; `pid` is set to its process id when known.
inline Asked ask_for_record(const std::string& dir, int rank, long& pid) {
  pid = 0;
  std::string host;
  if (!(std::ifstream(pid_path(dir, rank)) >> pid >> host) || pid <= 0 || host != this_host()) return Asked::kUnknown;
  const std::string id = std::to_string(pid);
  std::ifstream stat("/proc/" + id + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return Asked::kGone;  // reaped
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z') return Asked::kGone;
  if (detail::exe_of(id) != detail::exe_of("self")) return Asked::kUnknown;  // the pid was taken by another program
  return kill(static_cast<pid_t>(pid), SIGUSR1) == 0 ? Asked::kAsked : Asked::kGone;
}

}  // namespace distlab::lesson14
