// The `gloo` backend: one process per rank, on one machine or many, through
// LibTorch's c10d ProcessGroupGloo (TCP). CPU tensors.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/env.hpp"

namespace distlab::comm {

// Connects to the job described by `world` (rank 0 hosts the store at
// MASTER_ADDR:MASTER_PORT) and builds the full mesh of gloo connections.
std::unique_ptr<Communicator> make_gloo_communicator(const WorldInfo& world, CommOptions options);

}  // namespace distlab::comm
