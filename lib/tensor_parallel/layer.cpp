#include "tensor_parallel/layer.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <functional>
#include <string_view>
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

// Where each piece of the unsplit layer lives on this rank.
void attention_pieces(const std::string& prefix, const ParallelAttentionImpl& a, std::vector<Piece>& out) {
  out.push_back({prefix + ".in_proj_weight", {a.q_weight, a.k_weight, a.v_weight}, Cut::kRows});
  out.push_back({prefix + ".in_proj_bias", {a.q_bias, a.k_bias, a.v_bias}, Cut::kRows});
  out.push_back({prefix + ".out_proj.weight", {a.out_proj->weight}, Cut::kColumns});
  out.push_back({prefix + ".out_proj.bias", {a.out_proj->bias}, Cut::kWhole});
}

void norm_pieces(const std::string& name, const torch::nn::LayerNorm& norm, std::vector<Piece>& out) {
  out.push_back({name + ".weight", {norm->weight}, Cut::kWhole});
  out.push_back({name + ".bias", {norm->bias}, Cut::kWhole});
}

}  // namespace

at::Tensor value_or_gradient(const at::Tensor& p, bool gradients) {
  if (!gradients) return p.detach();
  return p.grad().defined() ? p.grad().detach() : at::zeros_like(p);
}

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
  if (full->linear1) {
    linear1 = register_module("linear1",
                              ColumnParallelLinear(group, full->linear1->weight, full->linear1->bias, options));
    linear2 = register_module("linear2",
                              RowParallelLinear(group, full->linear2->weight, full->linear2->bias, options));
  } else {
    for (const auto& child : full->named_children())
      if (child.key() == "moe") own_feed_forward_ = register_module("moe", child.value());
    if (!own_feed_forward_)
      throw std::invalid_argument(who + ": the layer has neither linear1 nor a feed-forward module of its own (\"moe\")");
  }
  norm1 = register_module("norm1", copy_layer_norm(full->norm1));
  norm2 = register_module("norm2", copy_layer_norm(full->norm2));
  if (dropout_ > 0 && !options.sequence_parallel)
    alike_ = generator_alike(full->linear1 ? full->linear1->weight : full->self_attn->in_proj_weight);
}

void ParallelLayerBase::set_feed_forward(std::function<at::Tensor(const at::Tensor&)> forward) {
  if (!own_feed_forward_)
    throw std::invalid_argument("tensor-parallel layer: set_feed_forward on a layer whose feed-forward is its own linear1 and linear2");
  run_own_feed_forward_ = std::move(forward);
}

at::Tensor ParallelLayerBase::feed_forward(const at::Tensor& x) {
  if (own_feed_forward_) {
    if (!run_own_feed_forward_)
      throw std::logic_error("tensor-parallel layer: its feed-forward module was given no forward (set_feed_forward)");
    return run_own_feed_forward_(x);
  }
  const at::Tensor hidden = gelu_ ? at::gelu(linear1(x)) : at::relu(linear1(x));
  return linear2(dropped(hidden));
}

at::Tensor ParallelLayerBase::dropped(const at::Tensor& x) {
  return dropout_ > 0 && is_training() ? at::dropout(x, dropout_, /*train=*/true) : x;
}

at::Tensor ParallelLayerBase::dropped_alike(const at::Tensor& x) {
  if (dropout_ <= 0 || !is_training()) return x;
  if (!alike_.defined()) return dropped(x);  // sequence parallel: my rows, my masks
  return dropout_alike(x, dropout_, alike_);
}

at::Generator generator_alike(const at::Tensor& seed_from) {
  const at::Tensor w = seed_from.detach().contiguous().cpu();
  const std::string_view bytes(static_cast<const char*>(w.data_ptr()), w.nbytes());
  return at::make_generator<at::CPUGeneratorImpl>(std::hash<std::string_view>{}(bytes));
}

at::Tensor dropout_alike(const at::Tensor& x, double p, at::Generator& alike) {
  at::Tensor keep = at::empty(x.sizes(), x.options().device(at::kCPU));
  keep.bernoulli_(1.0 - p, alike);  // each rank's own generator object: no other thread draws from it
  return x * keep.to(x.device()).div_(1.0 - p);
}

std::vector<at::Generator> ParallelLayerBase::own_generators() const {
  if (!alike_.defined()) return {};
  return {alike_};
}

std::vector<at::Tensor> ParallelLayerBase::replicated_parameters() const {
  std::vector<at::Tensor> out;
  for (const Piece& piece : pieces())
    if (piece.cut == Cut::kWhole) out.insert(out.end(), piece.parts.begin(), piece.parts.end());
  return out;
}

std::vector<Piece> ParallelLayerBase::pieces() const {
  std::vector<Piece> out;
  attention_pieces("self_attn", *self_attn, out);
  if (own_feed_forward_) {
    for (const auto& item : own_feed_forward_->named_parameters()) out.push_back({"moe." + item.key(), {item.value()}, Cut::kWhole});
  } else {
    out.push_back({"linear1.weight", {linear1->weight}, Cut::kRows});
    out.push_back({"linear1.bias", {linear1->bias}, Cut::kRows});
    out.push_back({"linear2.weight", {linear2->weight}, Cut::kColumns});
    out.push_back({"linear2.bias", {linear2->bias}, Cut::kWhole});
  }
  norm_pieces("norm1", norm1, out);
  norm_pieces("norm2", norm2, out);
  return out;
}

std::map<std::string, at::Tensor> ParallelLayerBase::whole_state(bool gradients) {
  auto of = [gradients](const at::Tensor& p) { return value_or_gradient(p, gradients); };
  std::map<std::string, at::Tensor> state;
  for (const Piece& piece : pieces()) {
    std::vector<at::Tensor> blocks;  // in_proj: q, k, v, each gathered by rows
    for (const at::Tensor& part : piece.parts)
      blocks.push_back(piece.cut == Cut::kWhole ? of(part).clone()
                                                : gather_parts(group_, of(part), piece.cut == Cut::kRows ? 0 : 1));
    state[piece.name] = blocks.size() == 1 ? blocks.front() : at::cat(blocks);
  }
  return state;
}

void ParallelLayerBase::load_whole_state(const std::map<std::string, at::Tensor>& whole) {
  at::NoGradGuard no_grad;
  for (const Piece& piece : pieces()) {
    const auto found = whole.find(piece.name);
    if (found == whole.end())
      throw std::invalid_argument("tensor-parallel layer: the whole state has no '" + piece.name + "'");
    const std::vector<at::Tensor> blocks = found->second.chunk(static_cast<int64_t>(piece.parts.size()), 0);
    for (size_t k = 0; k < piece.parts.size(); ++k) {
      at::Tensor part = piece.parts[k];
      const std::string what = "tensor-parallel layer: " + piece.name;
      part.copy_(piece.cut == Cut::kWhole ? blocks[k] : my_part(group_, blocks[k], piece.cut == Cut::kRows ? 0 : 1, what));
    }
  }
}

ParallelEncoderLayerImpl::ParallelEncoderLayerImpl(Communicator& group, const torch::nn::TransformerEncoderLayer& full,
                                                   ParallelOptions options)
    : ParallelLayerBase(group, full, options, "ParallelEncoderLayer") {}

at::Tensor ParallelEncoderLayerImpl::forward(const at::Tensor& src, const at::Tensor& src_mask) {
  // On the trace, the layer's forward around its two tensor-group collectives.
  trace::Span span(group_.recorder(), group_.world_rank(), trace::kLaneCompute, "tensor-parallel layer forward",
                   "forward");
  const at::Tensor x = norm1(src + dropped_alike(self_attn(src, src, src_mask)));
  return norm2(x + dropped_alike(feed_forward(x)));
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
  at::Tensor x = norm1(tgt + dropped_alike(self_attn(tgt, tgt, tgt_mask)));
  x = norm2(x + dropped_alike(multihead_attn(x, memory, memory_mask)));
  return norm3(x + dropped_alike(feed_forward(x)));
}

std::vector<Piece> ParallelDecoderLayerImpl::pieces() const {
  std::vector<Piece> out = ParallelLayerBase::pieces();
  attention_pieces("multihead_attn", *multihead_attn, out);
  norm_pieces("norm3", norm3, out);
  return out;
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
