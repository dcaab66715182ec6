// Ring attention, forward: every sequence split over the C ranks of a
// group, each rank holding its queries, keys and values; the keys and
// values travel round the ring while each rank computes.
//
//   step s (0 .. C-1): rank r holds the K/V block of rank (r - s) mod C;
//     it posts the send of that block to r + 1 and the receive of the next
//     from r - 1, computes its queries against the block it holds
//     (block_attention.hpp), merges the result in (stable, float32), then
//     waits for the transfer: the next block's transfer overlaps this
//     block's compute.
//
// Each rank's tokens carry their positions in the whole sequence, so any
// layout works: contiguous (rank r holds tokens [r S/C, (r+1) S/C),
// picotron's) or zigzag (the sequence cut in 2C chunks, rank r holding
// chunks r and 2C-1-r, which evens out the causal work). The positions
// travel with their block.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "context_parallel/block_attention.hpp"
#include "context_parallel/ring_plan.hpp"

namespace distlab::context_parallel {

// The positions (int64, (S / C,)) of the tokens rank `rank` of `ranks`
// holds in a sequence of `length`. Throws std::invalid_argument naming the
// sizes when the sequence does not split: S a multiple of C (contiguous),
// of 2C (zigzag).
at::Tensor positions_of(Layout layout, int64_t length, int ranks, int rank);

struct RingWork {
  // Per ring step: the query x key pairs this rank computed (under a causal
  // mask, the pairs not masked out) and the pairs in the block (computed or
  // skipped). RingPlan (ring_plan.hpp) says what they must be.
  std::vector<int64_t> computed, pairs;
  // Per ring step: the seconds this rank spent computing (the waits for
  // the next block left out: the ring moves at its slowest rank's pace,
  // so only the compute shows each rank's own share of the work).
  std::vector<double> compute_seconds;
};

// Every rank of `comm` calls it with q (..., Sq, D), k and v (..., Sk, D) on
// comm.device() and the positions (Sk,) of its tokens (queries and keys are
// the same tokens). Returns this rank's out (float32) and lse. `causal`:
// a query attends keys at positions not after its own. Messages use tags
// tag .. tag + 2. `work`, when given, gets the pairs per step.
BlockResult ring_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, const at::Tensor& positions, bool causal, int tag = 0,
                           RingWork* work = nullptr);

struct RingGradients {
  at::Tensor dq, dk, dv;  // float32, the shapes of this rank's q, k, v
};

// The backward of ring_attention for this rank's tokens, given the gradient
// of its output `dout` and the forward's `out` and `lse` (the whole row's,
// so each block's probabilities are exp(scores - lse) without another
// merge). The ring again: each rank's K and V travel with accumulators dK
// and dV for them; at step s rank r holds the block of rank (r - s) mod C,
// adds this block's share to its own dQ and to the travelling dK and dV,
// and passes the block on (its K and V posted before this block's compute,
// as in the forward; its dK and dV after). After C steps every block (and
// its finished dK, dV) is back with its owner. No block's K or V is kept
// from one step to the next. Messages use tags tag .. tag + 4.
//   P = exp(q k^T scale - lse)   D = rowsum(dout * out)
//   dV += P^T dout   dS = P * (dout v^T - D)   dQ += dS k scale   dK += dS^T q scale
RingGradients ring_attention_backward(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v, double scale, const at::Tensor& positions, bool causal,
                                      const BlockResult& forward, const at::Tensor& dout, int tag = 0);

}  // namespace distlab::context_parallel
