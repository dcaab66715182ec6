// The collectives, written once over point-to-point messages.
//
// Every call is made by every rank of `comm`, in the same order, with the
// same element count, dtype, algorithm and tag (as with any collective
// library). Each runs the Plan that make_plan() describes (see plan.hpp)
// through run_plan() (executor.hpp), one traced step at a time; or, with
// Algorithm::kNative, the backend's own collective.
//
//   collectives::broadcast(comm, weights, /*root=*/0, Algorithm::kTree);
//   collectives::all_reduce(comm, grads, ReduceOp::kAvg, Algorithm::kRing);
//
// Tensors: any shape, contiguous or not (a non-contiguous one is worked on
// as a contiguous copy and copied back), any dtype the backend moves,
// CPU or CUDA. Any number of elements, 0 and fewer than p included.
// Collectives that may be in flight at the same time need distinct `tag`s
// (see tags.hpp); calls in sequence can all use the default.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"

namespace distlab::collectives {

using comm::Communicator;
using comm::ReduceOp;

// ---------------------------------------------------------------- in place

// Every rank's `tensor` becomes the root's.
void broadcast(Communicator& comm, at::Tensor& tensor, int root = 0, Algorithm algorithm = Algorithm::kTree,
               int tag = 0);

// The root's `tensor` becomes op over every rank's. Other ranks' tensors
// may be left holding partial results (the tree adds into them on the way).
void reduce(Communicator& comm, at::Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::kSum,
            Algorithm algorithm = Algorithm::kTree, int tag = 0);

// Every rank's `tensor` becomes op over every rank's; the result is the
// same, bit for bit, on every rank.
void all_reduce(Communicator& comm, at::Tensor& tensor, ReduceOp op = ReduceOp::kSum,
                Algorithm algorithm = Algorithm::kRing, int tag = 0);

// `tensor` is the whole buffer (n elements) on every rank. Afterwards chunk
// `rank` of it (chunk_range(n, p, rank)) holds op over every rank's chunk;
// the other chunks are left undefined. Returns that chunk (a view of
// `tensor` when it is contiguous).
at::Tensor reduce_scatter(Communicator& comm, at::Tensor& tensor, ReduceOp op = ReduceOp::kSum,
                          Algorithm algorithm = Algorithm::kRing, int tag = 0);

// `tensor` is the whole buffer (n elements) with this rank's chunk
// (chunk_range(n, p, rank)) filled in; afterwards every chunk is.
void all_gather(Communicator& comm, at::Tensor& tensor, Algorithm algorithm = Algorithm::kRing, int tag = 0);

// ------------------------------------------------------------ out of place
// `input` is left untouched; `output` is written. Both are allocated by the
// caller with the same dtype and device.

// output (numel of input) = root's input, on every rank.
void broadcast(Communicator& comm, const at::Tensor& input, at::Tensor& output, int root = 0,
               Algorithm algorithm = Algorithm::kTree, int tag = 0);
// output (numel of input) = op over every rank's input, on the root; other
// ranks' outputs are scratch.
void reduce(Communicator& comm, const at::Tensor& input, at::Tensor& output, int root = 0, ReduceOp op = ReduceOp::kSum,
            Algorithm algorithm = Algorithm::kTree, int tag = 0);
// output (numel of input) = op over every rank's input.
void all_reduce(Communicator& comm, const at::Tensor& input, at::Tensor& output, ReduceOp op = ReduceOp::kSum,
                Algorithm algorithm = Algorithm::kRing, int tag = 0);
// input: n elements; output: chunk_range(n, p, rank).count elements = op over
// every rank's chunk `rank` of input.
void reduce_scatter(Communicator& comm, const at::Tensor& input, at::Tensor& output, ReduceOp op = ReduceOp::kSum,
                    Algorithm algorithm = Algorithm::kRing, int tag = 0);
// input: chunk_range(n, p, rank).count elements; output: n elements = every
// rank's input, in rank order.
void all_gather(Communicator& comm, const at::Tensor& input, at::Tensor& output, Algorithm algorithm = Algorithm::kRing,
                int tag = 0);

// ------------------------------------------------------------- all-to-all
// Every rank has a block of rows for every rank. Rows (dimension 0) may hold
// any shape, the same on every rank and in input and output. Algorithm
// kPairwise (plan_all_to_all.cpp) or kNative (the backend's own; gloo and
// threads have one).

// input: p equal blocks of rows (rows % p == 0), block d for rank d;
// output (input's shape): block s is rank s's block for this rank.
void all_to_all(Communicator& comm, const at::Tensor& input, at::Tensor& output,
                Algorithm algorithm = Algorithm::kPairwise, int tag = 0);
// Blocks of any size (PyTorch's all_to_all_single with split sizes): input
// holds send_rows[d] rows for rank d, in rank order; output gets
// recv_rows[s] rows from rank s, in rank order. recv_rows[s] must equal
// what rank s sends here (the counts are exchanged first when not known:
// expert parallelism does so). Zeros allowed.
void all_to_all_v(Communicator& comm, const at::Tensor& input, at::Tensor& output,
                  const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                  Algorithm algorithm = Algorithm::kPairwise, int tag = 0);

// The Plan a call on this communicator runs for `tensor` (for the cost
// model and for printing what is about to happen). Throws for kNative.
Plan plan_for(const Communicator& comm, Collective collective, Algorithm algorithm, const at::Tensor& tensor,
              int root = 0);

}  // namespace distlab::collectives
