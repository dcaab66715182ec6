// The tensor-parallel checks, written once and run on thread ranks
// (*_test.cpp) and on gloo processes (gloo_worker.cpp): each builds the
// unsplit module from a fixed seed on every rank, cuts its parallel form
// over `group`, and returns the largest difference between what this rank
// computed (outputs and every gradient, its slice of them) and the unsplit
// module's: +infinity when anything was NaN, so it fails its tolerance.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"
#include "support/differences.hpp"

namespace distlab::tensor_parallel::testing {

struct Check {
  std::string name;                                       // "mlp", "mlp_sp", "embedding", ...
  double tolerance;                                       // float32 rounding for this computation
  std::function<double(comm::Communicator& group)> run;  // every rank of `group` calls it
  // Group sizes it accepts (a head count or sequence that must split).
  std::function<bool(int group_size)> accepts = [](int) { return true; };
};

// Every check of every file, in a fixed order.
std::vector<Check> all_checks();

// Each file's own (all_checks() joins them).
std::vector<Check> mlp_checks();
std::vector<Check> layer_checks();
std::vector<Check> vocab_checks();

// The largest |a - b|; +infinity when the shapes differ or either holds a
// NaN, so a broken module cannot pass as close (support/differences.hpp).
using test_support::largest_difference;
using test_support::worst_of;

}  // namespace distlab::tensor_parallel::testing
