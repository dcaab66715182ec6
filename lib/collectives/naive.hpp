// The collectives as anyone would first write them, with plain send and
// recv and no Plan: the reference the fast versions are held against
// (tests/collectives), and what lessons 03-05 show before the library's.
// Tensors must be contiguous, as for the Communicator.
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"

namespace distlab::collectives::naive {

// The root sends the whole tensor to every other rank, one after another.
void broadcast(comm::Communicator& comm, at::Tensor& tensor, int root, int tag = 0);

// Every rank sends its whole tensor to the root, which combines them in rank
// order 0, 1, ..., p-1 (the order the threads backend's native reduce uses,
// so the two agree bit for bit). Other ranks' tensors are left as they were.
void reduce(comm::Communicator& comm, at::Tensor& tensor, int root, comm::ReduceOp op, int tag = 0);

// reduce to rank 0, then broadcast from it.
void all_reduce(comm::Communicator& comm, at::Tensor& tensor, comm::ReduceOp op, int tag = 0);

}  // namespace distlab::collectives::naive
