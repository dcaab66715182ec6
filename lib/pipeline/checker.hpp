// Proves a schedule valid before anyone runs it, or names the first action
// that is wrong.
//
// In order:
//  1. each action on its own: stage and microbatch in range, the stage lives
//     on this rank, a message has a peer on another rank;
//  2. each rank's program in order: no action twice, F after its input is
//     there (RECV_F, or the previous stage's F on this rank), B / I after
//     the stage's F and after the output gradient is there (RECV_B, or the
//     next stage's backward on this rank), W after I, a SEND after the
//     compute that produces what it sends, never B together with I / W;
//  3. completeness: every microbatch through every stage once, forward and
//     backward;
//  4. the programs played against each other (replay.hpp): nothing
//     deadlocks, every message sent is received.
#pragma once

#include <string>

#include "pipeline/schedule.hpp"

namespace distlab::pipeline {

struct CheckResult {
  bool ok = true;
  std::string error;  // "rank 1, action 4 (1B0): ..." when !ok
  int rank = -1;      // where the first offending action is, when one is to blame
  int index = -1;
};

CheckResult check(const Schedule& schedule);
// check(), throwing ScheduleError(error) when it fails.
void validate(const Schedule& schedule);

}  // namespace distlab::pipeline
