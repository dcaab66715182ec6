// Attention over a sequence split across the ranks of a context group, by
// any of the library's methods, as one differentiable call: what a model's
// attention runs under context parallelism (the capstone's --context C).
//
//   ring        K and V round the ring (ring_attention.hpp); forward and
//               backward are one autograd function, the backward the ring
//               again with dK and dV travelling home
//   all-gather  K and V gathered once (gathered_attention.hpp); the
//               gather's backward is a reduce-scatter of their gradients
//   naive       Q, K and V gathered whole, my rows kept
//   ulysses     an all-to-all to whole heads and back (ulysses.hpp)
//
// Each returns this rank's rows of softmax(q k^T scale) v over the whole
// sequence, in q's dtype. None applies dropout to the attention weights:
// no rank holds a row's whole weights at once (ring), or the method would
// have to draw the masks the one-process run draws.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::context_parallel {

enum class Method { kRing, kAllGather, kNaive, kUlysses };
const char* to_string(Method method);  // "ring", "all-gather", "naive", "ulysses"
// Throws std::invalid_argument naming the methods there are.
Method method_from_string(const std::string& name);
std::vector<Method> all_methods();

// Every rank of `comm` calls it with q, k, v (..., H, S_local, D) (any
// leading dimensions; Ulysses reads H at dimension -3 and refuses what C
// does not divide) and the positions (S_local,) int64 of its tokens. Tags
// tag .. tag + 4 of `comm`.
at::Tensor context_attention(comm::Communicator& comm, Method method, const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v, double scale, const at::Tensor& positions, bool causal,
                             int tag = 0);

}  // namespace distlab::context_parallel
