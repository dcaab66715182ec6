// One training problem for the sharded checkpoint tests, run the same way on
// thread ranks (checkpoint_test.cpp) and on gloo processes (gloo_worker.cpp):
// train some steps with ZeRO-1, -2 or -3 on N ranks, save, resume on M
// ranks, and compare with the run that never stopped.
//
// The model is 6 -> 9 -> 7 -> 3 (Tanh between), 157 parameters: a prime,
// so every world size cuts it unevenly, and ZeRO-1/2 use buckets of 160
// bytes, so chunks start and end inside parameters. Every step's global
// batch is the same kBatch rows whatever the number of ranks (rank r of N
// takes kBatch / N of them), so runs on 4, 3 and 2 ranks differ only in the
// order of sums.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::zero::testing {

enum class Sharding { kZero1, kZero2, kZero3 };
const char* to_string(Sharding sharding);

inline constexpr int kBatch = 12;     // rows per step, split among 1, 2, 3, 4 or 6 ranks
inline constexpr int kSaveStep = 3;   // the checkpoint is taken after this many steps
inline constexpr int kLastStep = 6;   // both runs end here

enum class Optimizer { kSgdMomentum, kAdam, kAdamWAmsgrad };
const char* to_string(Optimizer optimizer);

struct TrainSteps {
  Sharding sharding = Sharding::kZero1;
  Optimizer optimizer = Optimizer::kAdam;
  int first = 0;              // the step training starts from
  int last = kLastStep;       // the step it stops at
  std::string load_dir;       // when set: load the checkpoint of step `first` from it first
  std::string save_dir;       // when set: save the checkpoint of step `last` into it
};

// Every rank of `comm` calls it. Returns the whole parameters at the end,
// (157,) in registration order, the same on every rank.
at::Tensor train_steps(comm::Communicator& comm, const TrainSteps& run);

// The whole parameters a fresh model starts with on every rank before
// anything is loaded: far from any trained value, so a resume that forgot
// to load would show.
at::Tensor fresh_parameters();

}  // namespace distlab::zero::testing

namespace distlab::zero::testing {

// The gloo worker's two halves, for a few stage and optimizer pairs.
// "save": the uninterrupted run (rank 0 writes its final parameters to
// DIR/<case>/uninterrupted.pt) and the run that saves at kSaveStep into
// DIR/<case>. "resume", on any number of ranks: loads, finishes, compares.
// Returns the lines to print; a failure's line starts with "MISMATCH".
std::vector<std::string> save_or_resume(comm::Communicator& comm, const std::string& mode, const std::string& dir);

}  // namespace distlab::zero::testing
