// Data parallelism in one screen: the reference DistributedDataParallel is
// tested against. No buckets, no hooks, no overlap: after backward has
// finished, every gradient is all-reduced on its own and divided by the
// number of ranks.
//
//   broadcast_parameters(comm, *model);   // step 1: replicas start equal
//   loss.backward();                      // step 2: local gradients
//   average_gradients(comm, *model);      // step 3: everybody's average
//   optimizer.step();                     // step 4
#pragma once

#include <torch/nn/module.h>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"

namespace distlab::ddp {

// Rank 0's parameters and buffers into every rank's.
void broadcast_parameters(comm::Communicator& comm, torch::nn::Module& module);

// Each parameter's .grad becomes the mean over ranks (a parameter without a
// gradient counts as zero), with the given all-reduce algorithm.
void average_gradients(comm::Communicator& comm, torch::nn::Module& module,
                       collectives::Algorithm algorithm = collectives::Algorithm::kNative);

}  // namespace distlab::ddp
