// How lessons 02-05 time communication: every rank starts together (a
// barrier) and the operation is done when the slowest rank is done, so the
// time reported is the maximum over ranks.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "comm/communicator.hpp"

namespace distlab::lessons {

// Runs body() on every rank (all ranks call this) and returns the slowest
// rank's seconds, the same number on every rank.
template <typename Body>
double slowest_rank_seconds(comm::Communicator& comm, Body&& body) {
  comm.barrier();  // nobody starts the clock while another is still busy with the last thing
  const auto start = std::chrono::steady_clock::now();
  body();
  const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto slowest = torch::tensor({mine}, torch::kFloat64).to(comm.device());
  comm.native_all_reduce(slowest, comm::ReduceOp::kMax);
  return slowest.cpu().item<double>();
}

// The sum over ranks of a count (elements found wrong, say), on every rank.
inline int64_t sum_over_ranks(comm::Communicator& comm, int64_t mine) {
  auto total = torch::tensor({mine}, torch::kInt64).to(comm.device());
  comm.native_all_reduce(total);
  return total.cpu().item<int64_t>();
}

// 35 -> "35.0 s", 0.0042 -> "4.20 ms", 3.1e-5 -> "31.0 us".
inline std::string format_seconds(double s) {
  char text[32];
  if (s >= 1) std::snprintf(text, sizeof text, "%.1f s", s);
  else if (s >= 1e-3) std::snprintf(text, sizeof text, "%.2f ms", s * 1e3);
  else std::snprintf(text, sizeof text, "%.1f us", s * 1e6);
  return text;
}

}  // namespace distlab::lessons
