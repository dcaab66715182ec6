// The same-host transport's faults, as scenarios of comm_gloo_worker: the
// last rank is killed (SIGKILL) or stopped (SIGSTOP, silent) at a point of
// the transport it names, and the others end naming it.
// tests/comm/shm_faults_test.cpp starts the ranks itself (distlab-run would
// stop the others the moment one dies) and reads what each one prints.
#pragma once

#include <string>

#include "comm/communicator.hpp"

namespace distlab::comm::testing {

// What the fault scenarios print first, before the job: "rank R pid P".
void say_pid(int rank);

// "killed-in-setup", before the job: the last rank kills itself once its
// first communicator's segment is in /dev/shm and named in the store, before
// it is unlinked (comm::set_shm_fault_point's "created"), after printing
// "rank R: killed with its segment NAME not yet unlinked". The others never
// reach the job's body: their set-up ends naming it.
void arm_kill_in_setup(int rank, int world_size);

// "killed-before-page", before the job: the last rank kills itself before
// it creates or publishes anything of the transport's (its process page:
// comm::set_shm_fault_point's "page"), after printing "rank R: killed
// before publishing its process page". The others wait out their timeout
// for its page and end naming it.
void arm_kill_before_page(int rank, int world_size);

// "killed": the last rank sends rank 0 a 64 MiB message in two copies;
// rank 0 kills it once its ring shows part of the message read and more
// bytes in flight (the ring's counter samples), printing how many. Rank 0's
// recv and rank 1's (of a message never sent) end naming the dead rank.
void killed_mid_transfer(Communicator& comm);

// "collective-fault": every rank all-reduces 1 MiB `collective`ly (arena:
// through the arena, in chunks; one-copy: in one copy; parts: the parts of a
// bucket where they lie); the last rank meets `fault` (kill or stop) inside
// it, after a barrier of the collective (comm::set_shm_fault_point's
// "barrier"), printing "rank R: FAULT inside the all_reduce after its
// barrier K". The others' all_reduce ends naming it.
void collective_fault(Communicator& comm, const std::string& collective, const std::string& fault);

// "table-mismatch", 2 ranks, in one copy: rank 0 all-reduces a bucket's
// parts while rank 1 all-reduces one tensor of the same bytes. Each refuses,
// naming the other.
void table_mismatch(Communicator& comm);

}  // namespace distlab::comm::testing
