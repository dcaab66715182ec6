// The faults the flight recorder tests inject, the same on thread ranks and
// on gloo processes. Every rank runs five collectives of group "world" that
// match (#0 broadcast, #1-#3 all_reduce float32 [1024], ring), then #4,
// where `culprit` does something else:
//
//   skip   the culprit returns without calling all_reduce #4
//   order  the culprit calls broadcast [16] then all_reduce; the others
//          all_reduce then broadcast
//   shape  the culprit passes float32 [256] to all_reduce #4
//   dead   the culprit stops: throws (threads) or SIGKILLs itself (gloo)
//
// The others' wait in #4 ends with the communicator's timeout or the job's
// abort, and the flight files tell what happened.
#pragma once

#include <string>

#include "comm/communicator.hpp"

namespace distlab::flight_test {

inline constexpr int kFaultSeq = 4;

void run_fault(comm::Communicator& comm, const std::string& fault, int culprit);

}  // namespace distlab::flight_test
