// One check, run by the thread-rank tests and the gloo worker alike: every
// rank routes its own tokens (seeded by its rank) through a mixture of E
// experts held expert-parallel over the whole world, and the same tokens
// through the naive layer holding every expert; returns the largest
// difference of the outputs, the input's and the router's gradients and this rank's
// experts' gradients (the naive ones summed over the world with the
// backend's own all-reduce: one process holding every expert and every
// rank's tokens). A NaN or a shape mismatch is +inf.
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"
#include "experts/moe.hpp"

namespace distlab::experts::testing {

inline constexpr double kTolerance = 1e-5;
inline constexpr int64_t kModel = 8, kHidden = 12, kTokens = 20;

double largest_difference_from_naive(comm::Communicator& comm, const MoeOptions& options);

}  // namespace distlab::experts::testing
