// Ulysses (DeepSpeed-Ulysses): context parallelism by trading the sequence
// split for a head split around attention.
//
// Each of the C ranks holds S/C tokens of every head. One all-to-all turns
// that into every token of H/C heads; each rank attends its heads over the
// whole sequence (no ring, no merge: softmax rows are whole); a second
// all-to-all turns the output back into S/C tokens of every head.
//
//   before:  (H, S/C, D) per rank      to_heads:     (H/C, S, D) per rank
//   after:   (H/C, S, D) per rank      to_sequence:  (H, S/C, D) per rank
//
// Each all-to-all moves (C-1)/C of a rank's tensor, whatever C is, so
// Ulysses' bytes per rank fall as C grows (q, k, v and out: 4 (C-1)/C H
// S/C D elements), where the ring sends (C-1) K/V blocks of 2 H S/C D.
// The price: H must divide by C (each rank takes whole heads), and C is
// capped by the number of heads.
//
// Both exchanges are autograd functions (the backward of to_heads is
// to_sequence and back), so a loss on the output differentiates to q, k, v.
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"
#include "context_parallel/block_attention.hpp"

namespace distlab::context_parallel {

// x (..., H, S_local, D) -> (..., H / C, C S_local, D): every rank's tokens
// (in rank order) of this rank's heads [rank H / C, (rank + 1) H / C).
// Throws std::invalid_argument naming H and C when H % C != 0.
at::Tensor to_heads(comm::Communicator& comm, const at::Tensor& x, int tag = 0);
// The inverse: (..., H / C, C S_local, D) -> (..., H, S_local, D).
at::Tensor to_sequence(comm::Communicator& comm, const at::Tensor& x, int tag = 0);

// Arguments as ring_attention's (ring_attention.hpp); q, k, v are
// (..., H, S_local, D). Returns this rank's out (..., H, S_local, D) and lse
// (..., H, S_local), float32.
BlockResult ulysses_attention(comm::Communicator& comm, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              double scale, const at::Tensor& positions, bool causal, int tag = 0);

}  // namespace distlab::context_parallel
