// What lesson 14 shows once its job has stopped (or ended): every rank's
// flight file read back, each rank's last collectives lined up by their
// sequence number, and the diagnosis exactly as distlab-trace why prints it
// (the same library calls, flight::read_flight_files and diagnose, on the same directory).
//
// On thread ranks the program reads the files after the job, when every
// rank's is written. On processes the rank that reports waits a moment for
// the others' files: a rank writes its own when its wait times out, when it
// fails, when the launcher stops it (SIGTERM) or when asked (SIGUSR1,
// ask_for_records.hpp); a SIGKILLed rank never does.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "flight/dump_file.hpp"
#include "flight/recorder.hpp"
#include "flight/why.hpp"

namespace distlab::lesson14 {

// Those of `ranks` whose flight.rank<r>.json is not in `dir`.
inline std::vector<int> missing_files(const std::string& dir, const std::vector<int>& ranks) {
  std::vector<int> missing;
  for (int r : ranks)
    if (!std::filesystem::exists(flight::dump_path(dir, r))) missing.push_back(r);
  return missing;
}

// Waits until each of `ranks` has its file in `dir`, at most `limit`;
// returns the ranks still without one.
inline std::vector<int> wait_for_files(const std::string& dir, const std::vector<int>& ranks,
                                       std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::vector<int> missing = missing_files(dir, ranks);
  while (!missing.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    missing = missing_files(dir, missing);
  }
  return missing;
}

// Removes `dir`/flight.rank<r>.json (and .pid, ask_for_records.hpp, and
// distlab-run's .exit.json) for every r with keep(r) false: an earlier
// run's files would be read as this one's.
template <typename Keep>
void remove_old_files(const std::string& dir, Keep&& keep) {
  std::error_code ignored;
  std::vector<std::filesystem::path> old;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
    int rank = -1;
    char tail[8] = {};
    const std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), "flight.rank%d.%5s", &rank, tail) == 2 && rank >= 0 && !keep(rank) &&
        (std::string(tail) == "json" || std::string(tail) == "pid" || flight::is_exit_path(name)))
      old.push_back(entry.path());
  }
  for (const auto& path : old) std::filesystem::remove(path, ignored);
}

// "done", "waiting", ...: a collective's state in a few letters.
inline const char* state_word(flight::State state) {
  switch (state) {
    case flight::State::kEntered: return "entered";
    case flight::State::kStarted: return "waiting";
    case flight::State::kCompleted: return "done";
    case flight::State::kFailed: return "failed";
    case flight::State::kTimedOut: return "timed out";
  }
  return "?";
}

// Each rank's last `columns` collectives of group world, one row per rank,
// one column per sequence number: the same number is the same call on every
// rank of a correct program, so a column that disagrees is where they parted.
//
//   rank  #3                     #4               #5
//   0     all_reduce [161] done  reduce [1] done  all_reduce [161] timed out
//   3     all_reduce [161] done  reduce [1] done  -
inline std::string records_table(const std::vector<flight::Dump>& dumps, int world_size, int columns = 3) {
  uint64_t front = 0;
  for (const auto& d : dumps)
    for (const auto& e : d.entries)
      if (e.kind == "collective" && e.group == "world") front = std::max(front, e.seq);
  const uint64_t first = front + 1 >= static_cast<uint64_t>(columns) ? front + 1 - columns : 0;
  std::vector<std::vector<std::string>> rows(static_cast<size_t>(world_size) + 1);
  rows[0].push_back("rank");
  for (uint64_t s = first; s <= front; ++s) rows[0].push_back("#" + std::to_string(s));
  for (int r = 0; r < world_size; ++r) {
    auto& row = rows[static_cast<size_t>(r) + 1];
    row.push_back(std::to_string(r));
    const auto dump = std::find_if(dumps.begin(), dumps.end(), [&](const flight::Dump& d) { return d.rank == r; });
    if (dump == dumps.end()) {
      row.push_back("no flight file");
      continue;
    }
    for (uint64_t s = first; s <= front; ++s) {
      std::string cell = "-";
      for (const auto& e : dump->entries)
        if (e.kind == "collective" && e.group == "world" && e.seq == s) {
          int64_t count = 1;
          for (int64_t d : e.shape) count *= d;
          cell = e.op + " [" + std::to_string(count) + "] " + state_word(e.state);
        }
      row.push_back(cell);
    }
  }
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string text;
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) line += " " + row[c] + std::string(width[c] - row[c].size() + 1, ' ');
    text += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  }
  return text;
}

// Prints the table and the diagnosis of `dir`'s files; returns the diagnosis.
inline flight::Diagnosis print_records_and_diagnosis(const std::string& dir, int world_size) {
  const flight::FlightFiles files = flight::read_flight_files({dir});  // read once: the table and the diagnosis
  std::printf("  the last collectives each rank recorded, lined up by their number in group world:\n%s",
              records_table(files.dumps, world_size).c_str());
  const flight::Diagnosis diagnosis = flight::diagnose(files);
  std::printf("  what distlab-trace why says about these files:\n%s", flight::to_text(diagnosis).c_str());
  std::fflush(stdout);
  return diagnosis;
}

}  // namespace distlab::lesson14
