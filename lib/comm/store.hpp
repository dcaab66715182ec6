// The rendezvous store: a key-value server that rank 0 hosts at
// MASTER_ADDR:MASTER_PORT and every rank connects to (c10d's TCPStore).
// Gloo builds its connections through it; the NCCL backend passes its
// unique id through it.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/communicator.hpp"
#include "comm/env.hpp"

namespace distlab::comm {

// Blocks until all world.world_size ranks have connected, at most `timeout`.
// Throws SetupError with one line: port in use, master unreachable, or
// ranks that never came.
c10::intrusive_ptr<c10d::Store> connect_store(const WorldInfo& world, Milliseconds timeout);

}  // namespace distlab::comm
