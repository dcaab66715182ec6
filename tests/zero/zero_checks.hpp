// ZeRO against its references on one rank of any communicator (thread
// ranks in zero_test.cpp, gloo processes in gloo_worker.cpp).
//
// Each case trains one model for a few steps on this communicator's N ranks,
// rank r taking rows r*B..(r+1)*B of every step's N*B-row batch, with
//   naive ZeRO-1, ZeRO-1 and ZeRO-2 (each with the ring and the native
//   collectives, several buckets and one), naive ZeRO-3, ZeRO-3 (one unit
//   per Linear; with and without prefetch), and DDP;
// and in one process on the whole N-fold batch. Every ZeRO run must end
// within kTolerance of one process and of DDP, identical on every rank, with
// the same gradient norms as one process when clipping. The cases: SGD with
// momentum and Adam, with and without clipping, with gradient accumulation
// (no_sync, and a reduce-scatter per micro-step), on two models:
//   wide  8 -> 32 -> 32 -> 4, 1476 parameters
//   odd   6 -> 7 -> 5 -> 1, 95 parameters: divisible by none of 2, 3, 4, and
//         a 1-element bias (some ranks own nothing of it)
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::zero::testing {

// float32 keeps 24 bits (about 6e-8 relative). The runs differ only in the
// order of sums (over ranks, over rows, over the two halves of a collective)
// and, when clipping, in the norm (float64 over shards against torch's
// float32): each step's gradient differs by a few ulps, and four steps of
// SGD (lr 0.1, momentum 0.9) or Adam (lr 0.01) on parameters of O(1) carry
// that to about 2e-7 (the largest difference seen in every case here on 2-4
// ranks). 2e-6 leaves a tenfold margin for other CPUs' summation orders and
// still fails a step that is off by one element's update.
inline constexpr double kTolerance = 2e-6;

// Every case (thread ranks), or a few cases per flavor (gloo processes,
// where each collective costs a trip through TCP).
enum class Coverage { kEveryCase, kSpotChecks };

struct Report {
  std::vector<std::string> failures;  // one line each: case, flavor, rank, what differs
  int runs = 0;                       // ZeRO runs compared
  double worst_vs_single = 0;         // the largest difference seen, for the log
  double worst_vs_ddp = 0;
};

// Every rank of `comm` calls it; all run the same cases in the same order.
Report check_against_references(comm::Communicator& comm, Coverage coverage = Coverage::kEveryCase);

}  // namespace distlab::zero::testing
