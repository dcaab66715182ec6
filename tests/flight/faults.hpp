// The faults the flight recorder tests inject, the same on thread ranks and
// on gloo processes. Every rank runs four collectives of group "world" that
// match (#0 broadcast, #1-#3 all_reduce float32 [1024], ring), then the
// fault, done by `culprit`:
//
//   skip   the culprit returns without calling all_reduce #4
//   order  the culprit calls broadcast [16] then all_reduce; the others
//          all_reduce then broadcast
//   shape  the culprit passes float32 [256] to all_reduce #4
//   dead   the culprit stops: throws (threads) or SIGKILLs itself (gloo)
//   p2p    no collective #4: a message goes round the ranks (send to
//          rank + 1, recv from rank - 1, tag 0) three times, and the third
//          time the culprit sends with tag 1; the rank after it waits in
//          recv #2 from the culprit (tag 0), which never comes
//
// The culprits of order, shape and dead act only once every other rank is
// inside all_reduce #4, as their flight records show: the rings themselves
// on thread ranks; across processes, a flight file each other rank writes
// when it enters #4 (replaced by the one it writes when it fails).
//
// The others' wait ends with the communicator's timeout or the job's
// abort, and the flight files tell what happened.
#pragma once

#include <string>

#include "comm/communicator.hpp"
#include "fault_numbers.hpp"

namespace distlab::flight_test {

void run_fault(comm::Communicator& comm, const std::string& fault, int culprit);

}  // namespace distlab::flight_test
