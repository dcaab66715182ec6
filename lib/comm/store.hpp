// The rendezvous store: a key-value server at MASTER_ADDR:MASTER_PORT that
// every rank connects to (c10d's TCPStore). Gloo builds its connections
// through it; the NCCL backend passes its unique id through it.
//
// Who hosts it (comm/env.hpp): rank 0 under distlab-run, srun and mpirun;
// torchrun's agent when TORCHELASTIC_USE_AGENT_STORE=True. In the second
// case every rank is a client, and the store returned is a PrefixStore over
// "/worker/attempt_<restart count>": the agent's store outlives the workers,
// and each attempt must see only its own keys. Otherwise rank 0 writes its
// restart count in the store, and a rank of another attempt (one node's
// launcher restarted before the other's ranks had died) leaves it and tries
// again until the timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "comm/communicator.hpp"
#include "comm/env.hpp"

namespace distlab::comm {

// Blocks until all world.world_size ranks have connected, at most `timeout`.
// Throws SetupError with one line: port in use, master unreachable, or the
// ranks that never came.
//
// A process connects once per world and keeps the connection (rank 0 keeps
// hosting); each call is a new job over it, under the prefix
// "distlab/job<k>" of the process's k-th call, so jobs run one after the
// other in the same processes each meet afresh (every rank makes the same
// calls in the same order).
c10::intrusive_ptr<c10d::Store> connect_store(const WorldInfo& world, Milliseconds timeout);

// The key rank `rank` sets in its attempt's store to say it has joined.
std::string joined_key(int rank);

// A text value under `key`, and the wait for one another rank sets: at most
// `timeout`, then a SetupError "<failure> within <timeout> ms".
void set_text(c10d::Store& store, const std::string& key, const std::string& value);
std::string wait_text(c10d::Store& store, const std::string& key, Milliseconds timeout, const std::string& failure);

}  // namespace distlab::comm
