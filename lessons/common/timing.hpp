// How lessons time communication. Every rank starts together (a barrier)
// and an operation is done when the slowest rank is done, so a time is the
// maximum over ranks, the same number on every rank.
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
  // Work queued on a GPU counts once it is done: copying a value back waits
  // for everything queued before it on the current stream.
  if (comm.device().is_cuda()) torch::zeros({1}, torch::TensorOptions().device(comm.device())).cpu();
  const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto slowest = torch::tensor({mine}, torch::kFloat64).to(comm.device());
  comm.native_all_reduce(slowest, comm::ReduceOp::kMax);
  return slowest.cpu().item<double>();
}

// Seconds per call of body(), the slowest rank's, over `iters` calls after
// one untimed call (first touches, connections, allocations).
template <typename Body>
double seconds_per_call(comm::Communicator& comm, int iters, Body&& body) {
  body();
  return slowest_rank_seconds(comm, [&] {
           for (int i = 0; i < iters; ++i) body();
         }) /
         iters;
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
