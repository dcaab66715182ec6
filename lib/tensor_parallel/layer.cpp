#include "tensor_parallel/layer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

#include "collectives/collectives.hpp"
#include "tensor_parallel/naive.hpp"
#include "trace/recorder.hpp"

namespace distlab::tensor_parallel {

namespace {

// relu or gelu, as LibTorch stores it: a variant of kReLU, kGELU or a
// function (index() reads it alike in LibTorch 1.13 and 2.x).
template <typename Options>
bool uses_gelu(const Options& options, const std::string& who) {
  const size_t activation = options.activation().index();
  if (activation > 1) throw std::invalid_argument(who + ": a custom activation function cannot be cut; relu or gelu");
  return activation == 1;
}

// Gathers the unsplit layer's tensors (or their gradients) by its names.
class WholeState {
 public:
  WholeState(Communicator& group, bool gradients) : group_(group), gradients_(gradients) {}
  void attention(const std::string& prefix, const ParallelAttentionImpl& a) {
    state_[prefix + ".in_proj_weight"] = at::cat({rows(a.q_weight), rows(a.k_weight), rows(a.v_weight)});
    state_[prefix + ".in_proj_bias"] = at::cat({rows(a.q_bias), rows(a.k_bias), rows(a.v_bias)});
    state_[prefix + ".out_proj.weight"] = columns(a.out_proj->weight);
    state_[prefix + ".out_proj.bias"] = whole(a.out_proj->bias);
  }
  void feed_forward(const ColumnParallelLinear& linear1, const RowParallelLinear& linear2) {
    state_["linear1.weight"] = rows(linear1->weight);
    state_["linear1.bias"] = rows(linear1->bias);
    state_["linear2.weight"] = columns(linear2->weight);
    state_["linear2.bias"] = whole(linear2->bias);
  }
  void norm(const std::string& name, const torch::nn::LayerNorm& norm) {
    state_[name + ".weight"] = whole(norm->weight);
    state_[name + ".bias"] = whole(norm->bias);
  }
  std::map<std::string, at::Tensor> take() { return std::move(state_); }

 private:
  at::Tensor of(const at::Tensor& p) const {
    if (!gradients_) return p.detach();
    return p.grad().defined() ? p.grad().detach() : at::zeros_like(p);
  }
  at::Tensor rows(const at::Tensor& p) { return gather_parts(group_, of(p), 0); }     // column-parallel
  at::Tensor columns(const at::Tensor& p) { return gather_parts(group_, of(p), 1); }  // row-parallel
  at::Tensor whole(const at::Tensor& p) const { return of(p).clone(); }              // replicated

  Communicator& group_;
  const bool gradients_;
  std::map<std::string, at::Tensor> state_;
};

}  // namespace

torch::nn::LayerNorm copy_layer_norm(const torch::nn::LayerNorm& full) {
  torch::nn::LayerNorm norm(full->options);
  at::NoGradGuard no_grad;
  norm->weight.copy_(full->weight);
  norm->bias.copy_(full->bias);
  return norm;
}

template <typename Full>
ParallelLayerBase::ParallelLayerBase(Communicator& group, const Full& full, ParallelOptions options,
                                     const std::string& who)
    : group_(group), options_(options), dropout_(full->options.dropout()), gelu_(uses_gelu(full->options, who)) {
  self_attn = register_module("self_attn", ParallelAttention(group, full->self_attn, options));
  linear1 = register_module("linear1",
                            ColumnParallelLinear(group, full->linear1->weight, full->linear1->bias, options));
  linear2 = register_module("linear2",
                            RowParallelLinear(group, full->linear2->weight, full->linear2->bias, options));
  norm1 = register_module("norm1", copy_layer_norm(full->norm1));
  norm2 = register_module("norm2", copy_layer_norm(full->norm2));
}

at::Tensor ParallelLayerBase::feed_forward(const at::Tensor& x) {
  const at::Tensor hidden = gelu_ ? at::gelu(linear1(x)) : at::relu(linear1(x));
  return linear2(dropped(hidden));
}

at::Tensor ParallelLayerBase::dropped(const at::Tensor& x) {
  return dropout_ > 0 && is_training() ? at::dropout(x, dropout_, /*train=*/true) : x;
}

std::vector<at::Tensor> ParallelLayerBase::replicated_parameters() const {
  return {norm1->weight, norm1->bias, norm2->weight, norm2->bias, self_attn->out_proj->bias, linear2->bias};
}

std::map<std::string, at::Tensor> ParallelLayerBase::whole_state(bool gradients) {
  WholeState state(group_, gradients);
  state.attention("self_attn", *self_attn);
  state.feed_forward(linear1, linear2);
  state.norm("norm1", norm1);
  state.norm("norm2", norm2);
  return state.take();
}

ParallelEncoderLayerImpl::ParallelEncoderLayerImpl(Communicator& group, const torch::nn::TransformerEncoderLayer& full,
                                                   ParallelOptions options)
    : ParallelLayerBase(group, full, options, "ParallelEncoderLayer") {}

at::Tensor ParallelEncoderLayerImpl::forward(const at::Tensor& src, const at::Tensor& src_mask) {
  // On the trace, the layer's forward around its two tensor-group collectives.
  trace::Span span(group_.recorder(), group_.world_rank(), trace::kLaneCompute, "tensor-parallel layer forward",
                   "forward");
  const at::Tensor x = norm1(src + dropped(self_attn(src, src, src_mask)));
  return norm2(x + dropped(feed_forward(x)));
}

ParallelDecoderLayerImpl::ParallelDecoderLayerImpl(Communicator& group, const torch::nn::TransformerDecoderLayer& full,
                                                   ParallelOptions options)
    : ParallelLayerBase(group, full, options, "ParallelDecoderLayer") {
  multihead_attn = register_module("multihead_attn", ParallelAttention(group, full->multihead_attn, options));
  norm3 = register_module("norm3", copy_layer_norm(full->norm3));
}

at::Tensor ParallelDecoderLayerImpl::forward(const at::Tensor& tgt, const at::Tensor& memory,
                                             const at::Tensor& tgt_mask, const at::Tensor& memory_mask) {
  trace::Span span(group_.recorder(), group_.world_rank(), trace::kLaneCompute, "tensor-parallel layer forward",
                   "forward");
  at::Tensor x = norm1(tgt + dropped(self_attn(tgt, tgt, tgt_mask)));
  x = norm2(x + dropped(multihead_attn(x, memory, memory_mask)));
  return norm3(x + dropped(feed_forward(x)));
}

std::vector<at::Tensor> ParallelDecoderLayerImpl::replicated_parameters() const {
  std::vector<at::Tensor> out = ParallelLayerBase::replicated_parameters();
  for (const at::Tensor& p : {norm3->weight, norm3->bias, multihead_attn->out_proj->bias}) out.push_back(p);
  return out;
}

std::map<std::string, at::Tensor> ParallelDecoderLayerImpl::whole_state(bool gradients) {
  std::map<std::string, at::Tensor> state = ParallelLayerBase::whole_state(gradients);
  WholeState more(group_, gradients);
  more.attention("multihead_attn", *multihead_attn);
  more.norm("norm3", norm3);
  state.merge(more.take());
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
