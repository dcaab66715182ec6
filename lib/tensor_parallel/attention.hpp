// Multi-head attention with the heads split across the tensor group, cut
// from an unsplit torch::nn::MultiheadAttention(E, H) (Megatron-LM, section
// 3: "the GEMMs corresponding to each attention head are partitioned across
// GPUs ... no immediate communication is required to complete the
// self-attention").
//
// Head h works on features [h d, (h+1) d) of q, k and v (d = E/H), so rank r
// of t holding heads [r H/t, (r+1) H/t) needs rows [r E/t, (r+1) E/t) of
// each of W_q, W_k, W_v (in_proj_weight's three blocks): three
// column-parallel projections, then attention over its own heads exactly as
// torch's multi_head_attention_forward computes it (q scaled by d^-1/2,
// q k^T plus the mask, softmax, times v), and the output projection
// row-parallel over the same features: out_proj's columns [r E/t, ...).
// Forward crosses the wire once (the row-parallel g), backward once (f,
// where the inputs enter the region).
//
// Shapes as torch's without batch_first: (L, N, E). Sequence parallel
// (options.sequence_parallel): query and key_value arrive as my rows
// (L/t, N, E), are all-gathered on entry and the output reduce-scattered
// back to my rows.
//
// The attention core (softmax(q k^T) v over my heads) may be handed to
// another: set_core() takes a function of q (already scaled), k and v
// (N H/t, L or S, d) returning (N H/t, L, d). Context parallelism does so
// (the capstone's --context C, train/context_split.hpp): each rank holds
// L/C tokens and the core attends them to the whole sequence across the
// context group, the causal rule coming from each token's position, not
// from attn_mask.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <torch/nn/modules/activation.h>
#include <torch/nn/pimpl.h>

#include "tensor_parallel/linear.hpp"

namespace distlab::tensor_parallel {

class ParallelAttentionImpl : public torch::nn::Module {
 public:
  // `full`: the unsplit module (the same weights on every rank). Refuses,
  // naming the sizes, a head count t does not divide.
  ParallelAttentionImpl(Communicator& group, const torch::nn::MultiheadAttention& full, ParallelOptions options = {});

  // query (L, N, E), key_value (S, N, E) (the same tensor for
  // self-attention: it then enters the region once); attn_mask (L, S), float
  // (added) or bool (true = masked), or undefined. Returns (L, N, E).
  at::Tensor forward(const at::Tensor& query, const at::Tensor& key_value, const at::Tensor& attn_mask = {});

  int64_t heads() const { return heads_; }  // this rank's

  // q, k, v (N H/t, L, d), q scaled -> (N H/t, L, d).
  using Core = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v)>;
  // Replaces q k^T, the mask, the softmax, the weights' dropout and the
  // product with v; forward() then refuses an attn_mask (the core applies
  // its own rule).
  void set_core(Core core) { core_ = std::move(core); }
  // Recomputes the core in the backward instead of keeping what it
  // computes (memory/recompute.hpp; the capstone's --recompute selective):
  // q, k and v kept, not the scores, their softmax and its dropout (a
  // context core's exchanges run again too).
  void set_recompute_core(bool on) { recompute_core_ = on; }

  at::Tensor q_weight, k_weight, v_weight;  // (E/t, E) each: my rows of W_q, W_k, W_v
  at::Tensor q_bias, k_bias, v_bias;        // (E/t)
  RowParallelLinear out_proj{nullptr};      // (E, E/t): my columns of W_o; its bias whole

 private:
  Communicator& group_;
  ParallelOptions options_;
  int64_t heads_ = 0;     // H / t
  int64_t head_dim_ = 0;  // E / H
  double dropout_ = 0;    // on the attention weights, as the unsplit module's
  Core core_;             // set: the attention core runs elsewhere
  bool recompute_core_ = false;

  // The core: core_, or softmax(q k^T + mask) (dropped) v over my heads.
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& attn_mask,
                    bool training) const;
};
TORCH_MODULE(ParallelAttention);

// Rank r's rows of each of the three blocks of a (3E, ...) in_proj tensor,
// in q, k, v order (the layout the parts are gathered back from).
std::vector<at::Tensor> my_qkv_rows(const Communicator& group, const at::Tensor& in_proj, const std::string& what);

}  // namespace distlab::tensor_parallel
