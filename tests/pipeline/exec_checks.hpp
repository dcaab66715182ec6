// The executor against the unsplit model, for every executable schedule, on
// one rank of any communicator (thread ranks in exec_test.cpp, gloo
// processes in gloo_worker.cpp).
//
// The model: 8 layers of Linear(6, 6) + Tanh, weights from a formula (no
// random generator, so every rank and every process builds the same model
// without talking). A batch of 10 rows cut into 4 microbatches of 3, 3, 2, 2
// rows (DualPipeV on 4 ranks: 8 of 2, 2, 1, ..., 1), so the loss weighting
// by microbatch size is exercised too.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::pipeline::testing {

// Runs every schedule (GPipe, 1F1B, Interleaved v=2, LoopedBFS v=2, ZB-H1,
// interleaved zero bubble v=2, ZBV and DualPipeV in a V) on `comm`, and
// returns what differs from the unsplit model: each entry
// names the schedule, the rank and the max difference.
std::vector<std::string> check_against_unsplit(comm::Communicator& comm);

}  // namespace distlab::pipeline::testing
