// Tokens to experts and back, on one rank: the dispatch plan, the
// permutation that sorts a rank's (token, choice) assignments by expert,
// and the weighted sum that brings the experts' outputs back to their
// tokens.
//
// Capacity (Switch, GShard): an expert takes at most
//
//   capacity = ceil(T k cf / E)
//
// assignments (T tokens, k choices each, capacity factor cf); the rest are
// dropped before any exchange (Megatron drops them there too), and a
// dropped assignment adds nothing to its token's output (the layer's
// residual carries the token on). Priority: every token's first choice
// before any second choice, then in token order (GShard's). cf <= 0 is
// dropless: every assignment kept, the experts' loads as they come.
//
// dispatch() gathers the kept assignments' rows sorted by expert (and in
// priority order within each), counts per expert beside them; combine()
// scatters rows in that order back, each times its weight, summed per
// token. Both are differentiable (index_select and index_add).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace distlab::experts {

// ceil(tokens * top_k * capacity_factor / experts), at least 1; -1 for cf <= 0 (dropless).
int64_t capacity_of(int64_t tokens, int64_t top_k, double capacity_factor, int64_t experts);

struct DispatchPlan {
  int64_t tokens = 0, top_k = 1, experts = 1;
  int64_t capacity = -1;              // -1: dropless
  at::Tensor slots;                   // (kept,) int64: each kept assignment as t * k + j, sorted by expert
  std::vector<int64_t> kept;          // per expert: assignments kept (<= capacity)
  std::vector<int64_t> dropped;       // per expert: assignments dropped
  int64_t kept_total() const;
  int64_t dropped_total() const;
};

// `chosen` (T, k) int64 expert ids (Routing::experts).
DispatchPlan plan_dispatch(const at::Tensor& chosen, int64_t experts, double capacity_factor);

// x (T, d) -> (kept, d): the rows of the kept assignments, sorted by expert.
at::Tensor dispatch(const at::Tensor& x, const DispatchPlan& plan);
// rows (kept, d) in dispatch order, weights (T, k) -> (T, d): each token's
// rows times their weights, summed (0 for a token whose every choice was dropped).
at::Tensor combine(const at::Tensor& rows, const at::Tensor& weights, const DispatchPlan& plan);

// Runs expert i of `run` on each run of `counts[i]` consecutive rows of
// `rows` (sorted by expert), and returns the outputs in the same order.
// `pad_to` > 0: each expert's rows padded with zeros to that many first
// (fixed shapes, as GShard and DeepSpeed compute them); the padding's
// outputs are dropped, so the result and its gradients are the same.
template <typename Run>
at::Tensor run_sorted(const at::Tensor& rows, const std::vector<int64_t>& counts, int64_t pad_to, Run run);

}  // namespace distlab::experts

#include "experts/dispatch_inl.hpp"
