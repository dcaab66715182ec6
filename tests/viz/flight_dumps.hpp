// Flight-recorder dumps with known times, built in the test (the flight
// model and render tests), and the same written as files.
//
// The skip job: 4 ranks of group "world". Every rank runs #0 broadcast and
// #1-#3 all_reduce; collective k is entered at kT0 + k * 10 ms and ends
// 8 ms later. Ranks 0, 1 and 3 then enter all_reduce #4 (at kEnter4[r]),
// start waiting 20 us later and are still waiting when their files are
// written at kDumped; rank 2 returned after #3 (it ended #3 at
// kRank2Ended3, before anyone entered #4).
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "flight/dump_file.hpp"

namespace distlab::viz::testing_util {

inline constexpr int64_t kT0 = 1'000'000;  // us on the trace clock
inline constexpr int64_t kDumped = 1'600'000;
inline constexpr int64_t kEnter4[4] = {1'050'000, 1'050'300, 0, 1'050'100};  // rank 2 never enters #4
inline constexpr int64_t kRank2Ended3 = 1'047'500;

inline flight::Entry collective(uint64_t id, uint64_t seq, const std::string& op, int64_t entered,
                                flight::State state, int64_t ended, std::vector<int64_t> shape = {1024}) {
  flight::Entry e;
  e.id = id;
  e.group = "world";
  e.kind = "collective";
  e.seq = seq;
  e.op = op;
  e.algorithm = op == "broadcast" ? "tree" : "ring";
  e.root = op == "broadcast" ? 0 : -1;
  e.dtype = "float32";
  e.shape = std::move(shape);
  e.bytes = 4 * e.shape[0];
  e.site = "test / step " + std::to_string(seq);
  e.state = state;
  e.entered_us = entered;
  e.started_us = entered + 20;
  e.ended_us = ended;
  return e;
}

inline flight::Dump make_dump(int rank, int world, std::vector<flight::Entry> entries, const std::string& exit = "") {
  flight::Dump d;
  d.rank = rank;
  d.world_size = world;
  d.pid = 4242;
  d.host = "test";
  d.reason = "timeout";
  d.dumped_us = kDumped;
  d.dumped_unix_us = 1'700'000'000'000'000;
  d.capacity = 2000;
  d.recorded = entries.size();
  d.exit = exit;
  std::vector<int> members;
  for (int r = 0; r < world; ++r) members.push_back(r);
  d.groups = {{"world", members}};
  d.entries = std::move(entries);
  return d;
}

// #0-#3 as every rank of the skip job ran them.
inline std::vector<flight::Entry> agreed_four() {
  std::vector<flight::Entry> out;
  for (uint64_t k = 0; k < 4; ++k)
    out.push_back(collective(k, k, k == 0 ? "broadcast" : "all_reduce", kT0 + 10'000 * int64_t(k),
                             flight::State::kCompleted, kT0 + 10'000 * int64_t(k) + 8'000,
                             k == 0 ? std::vector<int64_t>{16} : std::vector<int64_t>{1024}));
  return out;
}

inline std::vector<flight::Dump> skip_job() {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 4; ++r) {
    std::vector<flight::Entry> entries = agreed_four();
    if (r == 2) {
      entries[3].ended_us = kRank2Ended3;
      dumps.push_back(make_dump(r, 4, entries, "returned"));
      continue;
    }
    entries.push_back(collective(4, 4, "all_reduce", kEnter4[r], flight::State::kStarted, 0));
    dumps.push_back(make_dump(r, 4, entries));
  }
  return dumps;
}

// Writes the dumps as flight.rank<R>.json into a fresh directory `dir`.
inline void write_dumps(const std::string& dir, const std::vector<flight::Dump>& dumps) {
  mkdir(dir.c_str(), 0755);
  for (const flight::Dump& d : dumps) flight::write_dump(d, flight::dump_path(dir, d.rank));
}

}  // namespace distlab::viz::testing_util
