// `--backend auto` for processes: ranks on the same host talk through shared
// memory (comm/shm_links.hpp), ranks on other hosts through gloo's TCP.
//
// A transport beneath the gloo backend rather than a backend of its own:
// the job still connects gloo's mesh, so every pair of ranks has TCP to
// fall back on, and a group that spans hosts runs gloo's collectives. What
// changes is the route: a send or recv between two ranks of one host goes
// through their ring, and a group whose members all share one host runs its
// barrier, broadcast, reduce, all-reduce and all-to-all in its shared arena.
// Which ranks share a host is decided from each rank's host identity
// (comm/host_identity.hpp), exchanged through the job's store, never from
// LOCAL_WORLD_SIZE. Everything above the transport (tracing, the flight
// recorder, timeouts naming the peer, split groups) is the Communicator's
// and stays the same.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/env.hpp"

namespace distlab::comm {

std::unique_ptr<Communicator> make_same_host_communicator(const WorldInfo& world, CommOptions options);

}  // namespace distlab::comm
