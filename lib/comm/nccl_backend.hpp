// The `nccl` backend: one process per GPU, NCCL communicators. Compiled when
// CUDA and NCCL are found (DISTLAB_HAVE_NCCL); runs where a GPU exists.
//
// Ordering: every operation runs on this rank's own communication stream.
// Before it starts, that stream waits for an event recorded on the compute
// stream (LibTorch's current stream), so the data it sends is finished; the
// caller's wait() then blocks the host until the operation is done and makes
// the compute stream wait for it, so later kernels see what was received.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/env.hpp"

namespace distlab::comm {

// True when this build has the NCCL backend.
bool nccl_compiled();

// Rank world.rank on GPU world.local_rank. Throws SetupError when there is no
// usable GPU, when LOCAL_RANK has no GPU of its own, or when two ranks share
// a GPU (NCCL refuses it: use the threads backend for that).
std::unique_ptr<Communicator> make_nccl_communicator(const WorldInfo& world, CommOptions options);

}  // namespace distlab::comm
