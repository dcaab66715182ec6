// How many threads each rank's tensor operations use.
//
// LibTorch sizes its intra-op pool to every core of the machine. With four
// ranks on a 2-core machine that is eight busy threads fighting for two
// cores: each rank's matrix products slow down more than they speed up, and
// communication threads wait for a core. So each rank takes its share,
// cores / ranks on this machine (at least 1), unless DISTLAB_INTRA_OP_THREADS
// or OMP_NUM_THREADS says otherwise (torchrun sets OMP_NUM_THREADS=1).
#pragma once

#include <string>

namespace distlab::comm {

struct IntraOpThreads {
  int threads = 1;
  std::string reason;  // one line: "2 cores / 4 ranks on this machine", "DISTLAB_INTRA_OP_THREADS=3"
};

// The choice for `local_ranks` ranks on this machine. Throws SetupError for
// a DISTLAB_INTRA_OP_THREADS that is not a positive number.
IntraOpThreads choose_intra_op_threads(int local_ranks);

// Applies the choice on the calling thread (call it on every rank's thread).
void set_intra_op_threads(const IntraOpThreads& choice);

}  // namespace distlab::comm
