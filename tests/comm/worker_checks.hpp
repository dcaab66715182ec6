// What every scenario of comm_gloo_worker shares: the values a rank sends
// (each rank derives what every other one sent, so it checks what it got on
// its own) and the count of the checks that failed.
#pragma once

#include <torch/types.h>

#include <iostream>
#include <string>

namespace distlab::comm::testing {

// --salt: 100 x salt is added to every value a job sends, so that two jobs
// on one host send different bytes and a message of the other job fails its
// check (in bfloat16 too: 100 is past its rounding below 4096).
inline int job_salt = 0;

// Rank r's contribution: distinct per rank, per element, per salt, per job.
inline at::Tensor input_of(int rank, int64_t n, int salt, at::ScalarType dtype = at::kFloat) {
  return (torch::arange(n, torch::kFloat64).fmod(89) + 1000 * rank + salt + 100 * job_salt).to(dtype);
}

inline int failures = 0;
inline void check(bool ok, const std::string& what, int rank) {
  if (!ok) {
    ++failures;
    std::cout << "rank " << rank << ": MISMATCH in " << what << std::endl;
  }
}

}  // namespace distlab::comm::testing
