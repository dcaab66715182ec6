#include "context_parallel/block_attention.hpp"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace distlab::context_parallel {
namespace {

std::string shape_of(const at::Tensor& t) {
  std::string text = "(";
  for (int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
  return text + ")";
}

void check_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& q_positions,
                  const at::Tensor& k_positions) {
  const std::string shapes = "q " + shape_of(q) + ", k " + shape_of(k) + ", v " + shape_of(v);
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
    throw std::invalid_argument("block attention: q, k and v need the same number (>= 2) of dimensions: " + shapes);
  if (k.sizes() != v.sizes() || q.size(-1) != k.size(-1) || q.sizes().slice(0, q.dim() - 2) != k.sizes().slice(0, k.dim() - 2))
    throw std::invalid_argument("block attention: q (..., Sq, D) and k, v (..., Sk, D) do not fit: " + shapes);
  if (q_positions.defined() != k_positions.defined())
    throw std::invalid_argument("block attention: causal needs the positions of both the queries and the keys");
  if (q_positions.defined() && (q_positions.dim() != 1 || q_positions.size(0) != q.size(-2) ||
                                k_positions.dim() != 1 || k_positions.size(0) != k.size(-2)))
    throw std::invalid_argument("block attention: positions " + shape_of(q_positions) + " and " +
                                shape_of(k_positions) + " for " + shapes + ": one per query and one per key");
}

}  // namespace

at::Tensor attention_scores(const at::Tensor& q, const at::Tensor& k, double scale, const at::Tensor& q_positions,
                            const at::Tensor& k_positions) {
  at::Tensor scores = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (q_positions.defined()) {
    const at::Tensor later = k_positions.to(q.device()).unsqueeze(0) > q_positions.to(q.device()).unsqueeze(1);
    scores = scores.masked_fill(later, -std::numeric_limits<float>::infinity());
  }
  return scores;
}

at::Tensor attention_probabilities(const at::Tensor& scores, const at::Tensor& lse) {
  const at::Tensor row_lse = lse.unsqueeze(-1);
  return at::where(at::isfinite(row_lse), at::exp(scores - row_lse), at::zeros_like(scores));
}

BlockResult block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                            const at::Tensor& q_positions, const at::Tensor& k_positions) {
  check_shapes(q, k, v, q_positions, k_positions);
  const at::Tensor scores = attention_scores(q, k, scale, q_positions, k_positions);
  const at::Tensor lse = at::logsumexp(scores, -1);  // -inf in rows that see no key: their out is 0
  return {at::matmul(attention_probabilities(scores, lse), v.to(at::kFloat)), lse};
}

void merge_into(BlockResult& acc, const BlockResult& block) {
  if (!acc.out.defined()) {
    acc = {block.out.to(at::kFloat), block.lse.to(at::kFloat)};
    return;
  }
  const at::Tensor blk_out = block.out.to(at::kFloat), blk_lse = block.lse.to(at::kFloat);
  // A side with lse -inf brings nothing: the formulas would give NaN
  // (-inf - -inf) there, so those rows keep the other side as it is.
  const at::Tensor acc_empty = at::isneginf(acc.lse), blk_empty = at::isneginf(blk_lse);
  const at::Tensor both = at::logical_not(at::logical_or(acc_empty, blk_empty));
  const at::Tensor safe_acc = at::where(both, acc.lse, at::zeros_like(acc.lse));
  const at::Tensor safe_blk = at::where(both, blk_lse, at::zeros_like(blk_lse));
  const at::Tensor merged_out = acc.out - at::sigmoid(safe_blk - safe_acc).unsqueeze(-1) * (acc.out - blk_out);
  const at::Tensor merged_lse = safe_acc - at::log_sigmoid(safe_acc - safe_blk);
  acc.out = at::where(both.unsqueeze(-1), merged_out, at::where(acc_empty.unsqueeze(-1), blk_out, acc.out));
  acc.lse = at::where(both, merged_lse, at::where(acc_empty, blk_lse, acc.lse));
}

BlockResult merge_naive(const BlockResult& a, const BlockResult& b) {
  const at::Tensor wa = at::exp(a.lse.to(at::kFloat)), wb = at::exp(b.lse.to(at::kFloat));
  const at::Tensor total = wa + wb;
  return {(wa.unsqueeze(-1) * a.out.to(at::kFloat) + wb.unsqueeze(-1) * b.out.to(at::kFloat)) / total.unsqueeze(-1),
          at::log(total)};
}

}  // namespace distlab::context_parallel
