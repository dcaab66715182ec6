// The sweep every collective is checked with, for one rank: each algorithm
// against the backend's native collective (reductions, within a tolerance
// that depends on dtype and p) and against inputs every rank recomputes
// (broadcast, all-gather: exact). Run by thread ranks in collectives_test.cpp
// and by gloo processes in gloo_worker.cpp.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "comm/communicator.hpp"
#include "sweep.hpp"

namespace distlab::collectives::testing {

struct Sweep {
  std::vector<at::ScalarType> dtypes;
  std::vector<int64_t> counts;
  bool every_root = true;  // else roots 0, p / 2 and p - 1
};

// Runs the whole sweep on this rank; every rank of `comm` calls it.
// Returns how many all-reduces of parts the backend ran in place
// (Communicator::all_reduces_parts_in_place).
int sweep_rank(comm::Communicator& comm, const Sweep& sweep, Failures& failures);

}  // namespace distlab::collectives::testing
