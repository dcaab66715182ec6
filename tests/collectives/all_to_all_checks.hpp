// All-to-all and all-to-all-v for one rank: the pairwise plan and the
// backend's own against blocks every rank recomputes for every other (pure
// copies, so exact), for any row counts (zeros included), several dtypes,
// rows of any width, on the whole communicator and on a group of it. Run by
// thread ranks in collectives_test.cpp and by gloo processes in
// gloo_worker.cpp.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "comm/communicator.hpp"
#include "sweep.hpp"

namespace distlab::collectives::testing {

// Rows rank `src` sends rank `dst` in case `salt`: 0 to 4, zeros among them.
int64_t rows_between(int src, int dst, int salt);

void check_all_to_all(comm::Communicator& comm, const std::vector<at::ScalarType>& dtypes, Failures& failures);

}  // namespace distlab::collectives::testing
