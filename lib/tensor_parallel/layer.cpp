#include "tensor_parallel/layer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

#include "collectives/collectives.hpp"
#include "tensor_parallel/naive.hpp"

namespace distlab::tensor_parallel {

torch::nn::LayerNorm copy_layer_norm(const torch::nn::LayerNorm& full) {
  torch::nn::LayerNorm norm(full->options);
  at::NoGradGuard no_grad;
  norm->weight.copy_(full->weight);
  norm->bias.copy_(full->bias);
  return norm;
}

ParallelEncoderLayerImpl::ParallelEncoderLayerImpl(Communicator& group, const torch::nn::TransformerEncoderLayer& full,
                                                   ParallelOptions options)
    : group_(group), options_(options) {
  // The activation as LibTorch stores it: a variant of kReLU, kGELU or a
  // function (index() reads it alike in LibTorch 1.13 and 2.x).
  const size_t activation = full->options.activation().index();
  if (activation > 1)
    throw std::invalid_argument("ParallelEncoderLayer: a custom activation function cannot be cut; relu or gelu");
  gelu_ = activation == 1;
  dropout_ = full->options.dropout();
  self_attn = register_module("self_attn", ParallelAttention(group, full->self_attn, options));
  linear1 = register_module("linear1", ColumnParallelLinear(group, full->linear1->weight, full->linear1->bias, options));
  linear2 = register_module("linear2", RowParallelLinear(group, full->linear2->weight, full->linear2->bias, options));
  norm1 = register_module("norm1", copy_layer_norm(full->norm1));
  norm2 = register_module("norm2", copy_layer_norm(full->norm2));
}

at::Tensor ParallelEncoderLayerImpl::forward(const at::Tensor& src, const at::Tensor& src_mask) {
  const bool train = is_training() && dropout_ > 0;
  const at::Tensor attended = self_attn(src, src, src_mask);
  const at::Tensor x = norm1(src + at::dropout(attended, dropout_, train));
  const at::Tensor hidden = gelu_ ? at::gelu(linear1(x)) : at::relu(linear1(x));
  const at::Tensor y = linear2(at::dropout(hidden, dropout_, train));
  return norm2(x + at::dropout(y, dropout_, train));
}

std::vector<at::Tensor> ParallelEncoderLayerImpl::replicated_parameters() const {
  return {norm1->weight, norm1->bias, norm2->weight, norm2->bias, self_attn->out_proj->bias, linear2->bias};
}

std::map<std::string, at::Tensor> ParallelEncoderLayerImpl::whole_state(bool gradients) {
  auto of = [gradients](const at::Tensor& p) {
    if (!gradients) return p.detach();
    return p.grad().defined() ? p.grad().detach() : at::zeros_like(p);
  };
  auto rows = [&](const at::Tensor& p) { return gather_parts(group_, of(p), 0); };     // column-parallel
  auto columns = [&](const at::Tensor& p) { return gather_parts(group_, of(p), 1); };  // row-parallel
  auto whole = [&](const at::Tensor& p) { return of(p).clone(); };                      // replicated
  const ParallelAttentionImpl& a = *self_attn;
  std::map<std::string, at::Tensor> state;
  state["self_attn.in_proj_weight"] = at::cat({rows(a.q_weight), rows(a.k_weight), rows(a.v_weight)});
  state["self_attn.in_proj_bias"] = at::cat({rows(a.q_bias), rows(a.k_bias), rows(a.v_bias)});
  state["self_attn.out_proj.weight"] = columns(a.out_proj->weight);
  state["self_attn.out_proj.bias"] = whole(a.out_proj->bias);
  state["linear1.weight"] = rows(linear1->weight);
  state["linear1.bias"] = rows(linear1->bias);
  state["linear2.weight"] = columns(linear2->weight);
  state["linear2.bias"] = whole(linear2->bias);
  state["norm1.weight"] = whole(norm1->weight);
  state["norm1.bias"] = whole(norm1->bias);
  state["norm2.weight"] = whole(norm2->weight);
  state["norm2.bias"] = whole(norm2->bias);
  return state;
}

void sync_sequence_parallel_grads(Communicator& group, const std::vector<at::Tensor>& replicated,
                                  const ParallelOptions& options) {
  if (!options.sequence_parallel || group.size() == 1) return;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : replicated) {
    if (!p.grad().defined()) continue;
    at::Tensor grad = p.mutable_grad();
    collectives::all_reduce(group, grad);
  }
}

}  // namespace distlab::tensor_parallel
