// Attention on one block of queries against one block of keys, with what it
// takes to merge blocks later: the output and its log-sum-exp (lse).
//
// Context parallelism splits every sequence over ranks for the whole layer.
// A rank holds some queries and sees the keys and values block by block (a
// ring brings the others' blocks, or an all-gather brings them all); it
// never holds the whole score matrix. Each block gives
//
//   out_b = softmax(q k_b^T * scale) v_b       lse_b = log sum_j exp(q k_bj^T * scale)
//
// and the whole row's softmax is the blocks' outputs weighted by
// exp(lse_b - lse), lse = log sum_b exp(lse_b). merge_into() folds block b
// into a (the blocks merged so far), giving ab, in float32:
//
//   out_ab = out_a - sigmoid(lse_b - lse_a) * (out_a - out_b)
//   lse_ab = lse_a - logsigmoid(lse_a - lse_b)
//
// the max-subtracted merge of online softmax (m = max(lse_a, lse_b), the
// blocks weighted by exp(lse - m) <= 1) written as one update of the pair:
// lse_a + log(1 + exp(lse_b - lse_a)), with log(1 + exp(d)) as
// -logsigmoid(-d), which stays finite where exp(d) overflows (d > 88.7).
//
// merge_naive() takes exp(lse) of each block with no maximum subtracted:
// with an lse above about 88.7 float32's exp overflows and the result is
// NaN. It is here to show why (tests/context_parallel checks both).
//
// Causal attention across blocks needs each token's position in the whole
// sequence: a query attends a key whose position is not greater than its
// own. Positions are given per token, so a block may hold pieces of the
// sequence that are not contiguous (zigzag: chunks r and 2C-1-r). A query
// row that sees no key at all in a block gets out 0 and lse -inf, which the
// merge treats as "nothing from this block".
#pragma once

#include <ATen/core/Tensor.h>

namespace distlab::context_parallel {

struct BlockResult {
  at::Tensor out;  // (..., Sq, D) float32
  at::Tensor lse;  // (..., Sq) float32; -inf where the block gave the row nothing
};

// q (..., Sq, D), k and v (..., Sk, D), any float dtype, computed in
// float32. With `q_positions` (Sq,) and `k_positions` (Sk,) int64 given,
// causal; undefined tensors: every query sees every key. Throws
// std::invalid_argument naming the shapes that do not fit.
BlockResult block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                            const at::Tensor& q_positions = {}, const at::Tensor& k_positions = {});

// The pieces, for the backward (ring_attention.hpp), which recomputes the
// probabilities from the whole row's lse:
// q k^T * scale in float32, -inf where a key lies after its query (when
// positions are given).
at::Tensor attention_scores(const at::Tensor& q, const at::Tensor& k, double scale,
                            const at::Tensor& q_positions = {}, const at::Tensor& k_positions = {});
// exp(scores - lse) row by row; 0 in rows that see no key (lse -inf).
at::Tensor attention_probabilities(const at::Tensor& scores, const at::Tensor& lse);

// Folds `block` (b) into `acc` (a) in the form above: `acc` becomes ab. An
// empty `acc` (out undefined) becomes the block.
void merge_into(BlockResult& acc, const BlockResult& block);

// No maximum subtracted: (exp(lse_a) out_a + exp(lse_b) out_b) / (exp(lse_a) + exp(lse_b)).
BlockResult merge_naive(const BlockResult& a, const BlockResult& b);

}  // namespace distlab::context_parallel
