// One check, run by the thread-rank tests and the gloo worker alike: every
// rank of `comm` attends its tokens of a 24-token sequence (the same seeded
// Q, K, V on every rank, each keeping the tokens its layout gives it) by
// `method`, and returns its largest difference from PyTorch's softmax over
// the whole sequence at its positions (output and log-sum-exp; a NaN or a
// shape mismatch is +inf).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "comm/communicator.hpp"
#include "context_parallel/context_attention.hpp"
#include "context_parallel/ring_attention.hpp"

namespace distlab::context_parallel::testing {

inline constexpr double kTolerance = 2e-6;
inline constexpr int64_t kLength = 24;  // the checks' sequence: 2C chunks for C = 1, 2, 3, 4
inline constexpr int64_t kHeads = 12;   // whole heads for Ulysses on C = 1, 2, 3, 4

// Standard-normal values from their own generator: the same on every rank.
at::Tensor seeded(at::IntArrayRef shape, uint64_t seed);
// The reference's scores over the whole sequence: q k^T * scale, -inf where
// a key lies after its query when `causal` (positions 0 .. S-1), for
// at::softmax and at::logsumexp to take.
at::Tensor whole_scores(const at::Tensor& q, const at::Tensor& k, double scale, bool causal);

double largest_difference_from_whole(comm::Communicator& comm, Layout layout, bool causal, Method method);

// The same for the gradients of sum(out * G) with respect to q, k and v at
// this rank's positions, against autograd on the whole sequence, through
// context_attention (context_attention.hpp): the ring's own backward as an
// autograd function, autograd through the gathers (whose backward is a
// reduce-scatter) and through Ulysses' exchanges.
inline constexpr double kGradientTolerance = 1e-5;
double largest_gradient_difference(comm::Communicator& comm, Layout layout, bool causal, Method method);

}  // namespace distlab::context_parallel::testing
