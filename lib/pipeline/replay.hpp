// Plays a schedule's programs against each other in time: the one engine
// under both the checker (does it finish?) and the simulator (when does each
// action run?).
//
// Semantics (schedule.hpp): each rank runs its actions in order. A compute
// action occupies the rank for its cost. A SEND is posted at once and does
// not occupy the rank; its message arrives `comm` seconds later. A RECV
// blocks the rank until its message has arrived. When none can move but
// some have actions left, the schedule deadlocks.
//
// Ranks that share processors: with `cores` > 0, at most that many compute
// actions run at once. A rank whose action is ready waits for a free core,
// first come first served (ties: lower rank), and that wait is idle time, as
// on a machine with more rank threads than cores (or several ranks on one
// GPU) where a rank whose message has arrived still waits to be scheduled.
// The engine advances in time order: it always takes the ready action that
// can start earliest, so cores go to ranks in the order they asked.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"

namespace distlab::pipeline {

struct TimedAction {
  double begin = 0;  // a RECV: when the rank started waiting
  double end = 0;    // a SEND: when its message arrives
};

struct Replay {
  bool finished = false;
  std::string deadlock;  // when !finished: every blocked rank, its action and what it waits for
  std::vector<std::vector<TimedAction>> times;  // times[rank][index] for the actions that ran
  std::vector<double> rank_end;                 // when each rank finished its last action
};

// cost(action): seconds a compute action takes, or a message's latency.
// cores: processors the ranks share; 0 gives every rank its own.
Replay replay(const Schedule& schedule, const std::function<double(const Action&)>& cost, int cores = 0);

// The message a SEND posts and a RECV waits for, as "0->1 F mb 3": the
// sending stage, the receiving stage, activation (F) or gradient (B).
std::string message_of(const Action& action);

}  // namespace distlab::pipeline
