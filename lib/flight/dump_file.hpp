// The flight recorder's file: one per rank, flight.rank<N>.json, written
// whole to a temporary name and renamed, so that a reader sees the last
// complete dump or none, even if the writer is killed halfway. The form is
// documented, with an example, in launcher/README.md ("Flight recorder").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "flight/entry.hpp"

namespace distlab::flight {

inline constexpr int kDumpVersion = 1;
// The largest world size the readers take: distlab-trace why lays out
// every rank of the world, so a damaged file must not claim billions.
inline constexpr int kMaxWorldSize = 1 << 20;

// A group this rank belongs to and its members' job-wide ranks (index =
// rank in the group).
struct Group {
  std::string name;
  std::vector<int> ranks;
};

struct Dump {
  int version = kDumpVersion;
  int rank = 0;        // job-wide
  int world_size = 1;
  int pid = 0;
  std::string host;
  std::string reason;  // "timeout", "job aborted", "SIGUSR1", "failed exit", ...
  int64_t dumped_us = 0;       // trace clock (CLOCK_MONOTONIC) at the dump
  int64_t dumped_unix_us = 0;  // wall clock at the same moment: turns the entries' times into dates
  uint64_t capacity = 0;       // the ring's size
  uint64_t recorded = 0;       // operations recorded in all; the oldest recorded - entries.size() were dropped
  std::string exit;            // "returned", "failed: <error>", or "" while the rank still ran
  std::vector<Group> groups;
  std::vector<Entry> entries;  // oldest first
};

// A file that is not a flight dump (or exit record, exit_file.hpp) of this
// version, or is damaged. The message names the file and what is wrong, in
// one line.
class BadDump : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "<dir>/flight.rank<N>.json"
std::string dump_path(const std::string& dir, int rank);
// Writes `dump` atomically (temporary file, then rename). Throws
// std::runtime_error naming the path when it cannot.
void write_dump(const Dump& dump, const std::string& path);
// `text` into `path` the same way (exit_file.cpp writes through it too).
void write_whole(const std::string& path, const std::string& text);
// Throws BadDump.
Dump read_dump(const std::string& path);

}  // namespace distlab::flight
