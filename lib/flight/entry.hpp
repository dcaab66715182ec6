// One line of the flight recorder: an operation a rank asked for, and how far
// it got. No LibTorch here: the launcher-side tools (distlab-trace why) read
// the same struct back from the dump files.
//
// Sequence numbers are what make the ranks' records comparable:
// - a collective gets the next number of its group ("world" or a group made
//   by split()), counted alike on every member, so all_reduce #42 of group
//   "world" is the same call on every rank of a correct program;
// - a send or recv gets the next number of its (peer, tag) pair in its
//   direction: the 9th send from rank 2 to rank 3 with tag 0 is #8 on
//   rank 2, and the recv that matches it is recv #8 from rank 2 on rank 3.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distlab::flight {

// entered: the rank called it. started: the rank began to wait for it (a
// collective runs from its first step; a send or recv from its wait()).
// Then exactly one of completed, failed (an error, the job aborted) or
// timed_out.
enum class State { kEntered, kStarted, kCompleted, kFailed, kTimedOut };
const char* to_string(State state);
// Throws std::invalid_argument for an unknown name.
State state_from_string(const std::string& name);

struct Entry {
  uint64_t id = 0;          // this rank's n-th recorded operation (0, 1, ...)
  std::string group;        // "world" or the group's name
  int group_rank = 0;       // this rank's place in the group
  std::string kind;         // "collective" or "p2p"
  uint64_t seq = 0;         // see above
  std::string op;           // all_reduce, broadcast, barrier, send, recv, ...
  std::string algorithm;    // ring, tree, native, ... ("" for p2p)
  int peer = -1;            // p2p: the other rank, job-wide number
  int root = -1;            // rooted collectives: the root, job-wide number
  int tag = -1;             // p2p: the message tag
  std::string dtype;        // float32, int64, ... (PyTorch's names)
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  std::string site;         // who called it: "pipeline F3 stage 1", "lesson 14", ...
  State state = State::kEntered;
  int64_t entered_us = 0;   // trace::now_us() (CLOCK_MONOTONIC), 0 = not yet
  int64_t started_us = 0;
  int64_t ended_us = 0;     // completed, failed or timed out
  std::string error;        // the first line of the error, when failed or timed out

  bool done() const { return state == State::kCompleted || state == State::kFailed || state == State::kTimedOut; }
};

// "all_reduce #42", "recv #9 from rank 2 (tag 0)": how the diagnosis names it.
std::string name_of(const Entry& e);
// "float32 [1024]"
std::string shape_text(const Entry& e);

}  // namespace distlab::flight
