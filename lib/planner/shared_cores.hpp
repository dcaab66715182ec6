// A pipeline schedule played on cores its ranks share, as thread ranks run
// on a CPU with fewer cores than ranks: every rank that has work at an
// instant runs, each at the speed the machine gives that many busy ranks
// (the profile's slowdown: 1 / slowdown(n) of a rank alone), and a rank
// waiting for a message lends its share to the others. This is processor
// sharing (the kernel's scheduler time-slices the runnable threads), not
// pipeline/replay.hpp's cores, which hand a whole action to one core first
// come first served.
//
// `copies` identical pipelines run at once (the layout's R x C x T
// pipelines step together): n busy ranks of one pipeline are n x copies
// busy ranks of the machine.
//
// Each message costs `message_s` after its send, as in the replay. A rank
// woken by a message it waited for starts `wake_s` later (a sleeping
// thread made runnable again).
//
//   makespan   when the last rank finished
//   busy       per rank: the seconds it ran (at whatever speed)
//   bubble     the mean over ranks of the time it had nothing to run
#pragma once

#include <functional>
#include <vector>

#include "pipeline/schedule.hpp"

namespace distlab::planner {

struct SharedRun {
  double makespan = 0;
  std::vector<double> busy;
  double bubble = 0;
  std::vector<std::vector<std::pair<double, double>>> compute;  // per rank: each compute action's (begin, end)
};

struct SharedCosts {
  std::function<double(const pipeline::Action&)> seconds;  // a compute action alone on its rank
  double message_s = 0;
  double wake_s = 0;
  int copies = 1;
  std::function<double(double busy_ranks)> slowdown;  // >= 1; of each rank when that many are busy
};

// Throws pipeline::ScheduleError when the schedule deadlocks.
SharedRun run_on_shared_cores(const pipeline::Schedule& schedule, const SharedCosts& costs);

}  // namespace distlab::planner
