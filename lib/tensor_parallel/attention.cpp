#include "tensor_parallel/attention.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "memory/recompute.hpp"
#include "tensor_parallel/split.hpp"

namespace distlab::tensor_parallel {

std::vector<at::Tensor> my_qkv_rows(const Communicator& group, const at::Tensor& in_proj, const std::string& what) {
  const int64_t e = in_proj.size(0) / 3;
  std::vector<at::Tensor> parts;
  for (int64_t block = 0; block < 3; ++block) parts.push_back(my_part(group, in_proj.narrow(0, block * e, e), 0, what));
  return parts;
}

ParallelAttentionImpl::ParallelAttentionImpl(Communicator& group, const torch::nn::MultiheadAttention& full,
                                             ParallelOptions options)
    : group_(group), options_(options) {
  const int64_t e = full->options.embed_dim(), h = full->options.num_heads();
  heads_ = split_evenly("ParallelAttention: " + std::to_string(h) + " heads", h, group.size());
  head_dim_ = e / h;
  const std::string what = "ParallelAttention: " + std::to_string(e) + " features";
  const std::vector<at::Tensor> w = my_qkv_rows(group, full->in_proj_weight.detach(), what);
  const std::vector<at::Tensor> b = my_qkv_rows(group, full->in_proj_bias.detach(), what);
  q_weight = register_parameter("q_weight", w[0]);
  k_weight = register_parameter("k_weight", w[1]);
  v_weight = register_parameter("v_weight", w[2]);
  q_bias = register_parameter("q_bias", b[0]);
  k_bias = register_parameter("k_bias", b[1]);
  v_bias = register_parameter("v_bias", b[2]);
  out_proj = register_module("out_proj",
                             RowParallelLinear(group, full->out_proj->weight, full->out_proj->bias, options));
  dropout_ = full->options.dropout();
}

at::Tensor ParallelAttentionImpl::forward(const at::Tensor& query, const at::Tensor& key_value,
                                          const at::Tensor& attn_mask) {
  // Into the region: every rank needs the whole input for its heads.
  auto enter = [&](const at::Tensor& x) {
    return options_.sequence_parallel ? gather_from_sequence_region(group_, x) : copy_to_region(group_, x);
  };
  const bool self = query.is_same(key_value);
  const at::Tensor x_q = enter(query);
  const at::Tensor x_kv = self ? x_q : enter(key_value);
  const int64_t l = x_q.size(0), n = x_q.size(1), s = x_kv.size(0);
  const int64_t local = heads_ * head_dim_;  // E / t

  // (L, N, E/t) -> (N * H/t, L, d), as multi_head_attention_forward lays heads out.
  auto heads = [&](const at::Tensor& t, int64_t len) {
    return t.contiguous().view({len, n * heads_, head_dim_}).transpose(0, 1);
  };
  const at::Tensor q = heads(at::linear(x_q, q_weight, q_bias) * (1.0 / std::sqrt(double(head_dim_))), l);
  const at::Tensor k = heads(at::linear(x_kv, k_weight, k_bias), s);
  const at::Tensor v = heads(at::linear(x_kv, v_weight, v_bias), s);
  if (core_) TORCH_CHECK(!attn_mask.defined(), "ParallelAttention: an attention core of its own takes no attn_mask");
  const bool training = is_training();
  const at::Tensor core =
      recompute_core_ ? memory::checkpoint(
                            [this, attn_mask, training](const memory::Tensors& in) {
                              return memory::Tensors{attend(in[0], in[1], in[2], attn_mask, training)};
                            },
                            {q, k, v})[0]
                      : attend(q, k, v, attn_mask, training);
  const at::Tensor mixed = core.transpose(0, 1).contiguous().view({l, n, local});
  return out_proj(mixed);  // out of the region: the row-parallel g (or reduce-scatter)
}

at::Tensor ParallelAttentionImpl::attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const at::Tensor& attn_mask, bool training) const {
  if (core_) return core_(q, k, v);
  at::Tensor scores = at::bmm(q, k.transpose(1, 2));  // (N H/t, L, S)
  if (attn_mask.defined())
    scores = attn_mask.scalar_type() == at::kBool
                 ? scores.masked_fill(attn_mask, -std::numeric_limits<float>::infinity())
                 : scores + attn_mask;
  at::Tensor weights = at::softmax(scores, -1);
  if (dropout_ > 0 && training) weights = at::dropout(weights, dropout_, /*train=*/true);
  return at::bmm(weights, v);
}

}  // namespace distlab::tensor_parallel
