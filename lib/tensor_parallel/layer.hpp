// Tensor-parallel Transformer layers. The encoder layer, cut from an unsplit
// torch::nn::TransformerEncoderLayer (the capstone's TransformerLm is a
// stack of them) and computing what it computes (post-norm, LibTorch's
// order):
//
//   x = norm1(src + dropout1(self_attn(src, src, src, mask)))
//   y = norm2(x + dropout2(linear2(dropout(activation(linear1(x))))))
//
// self_attn is ParallelAttention (heads split), linear1 column-parallel,
// linear2 row-parallel: two all-reduces forward and two backward per layer.
// The LayerNorms, the residuals and the dropouts between the regions are
// replicated: every rank computes them on the whole (S, N, E) tensor.
//
// With sequence parallelism each rank computes them on its S/t rows
// instead, and the all-reduces become all-gathers on the way in and
// reduce-scatters on the way out (regions.hpp): the same bytes, the
// activations of the replicated part divided by t (Korthikanti et al. 2022:
// per layer sbh(10 + 24/t + 5as/(ht)) bytes with tensor parallelism,
// sbh/t (34 + 5as/h) with both). The replicated parameters (the norms, the
// row-parallel biases) then see only this rank's rows: their gradients are
// partial sums, which sync_sequence_parallel_grads() adds up over the group
// after backward (Megatron does the same).
//
// Dropout inside a region (the attention weights of my heads, my columns of
// the MLP) draws from each rank's own generator, as the unsplit layer draws
// a mask for every head. The dropouts between the regions draw the same
// mask on every rank of the group (from a generator seeded alike on all of
// them; Megatron keeps a second, tracked RNG state for the same reason):
// the activations there must stay equal on every rank, or the replicated
// norms would see different inputs and drift apart. Under sequence
// parallelism each rank holds other rows, so it draws its own masks there.
// Equality with the unsplit layer is checked with dropout 0.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/transformerlayer.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor_parallel/attention.hpp"

namespace distlab::tensor_parallel {

// How a piece of the unsplit layer is kept on this rank: my rows of it
// (column-parallel), my columns (row-parallel), or whole (replicated).
// in_proj's piece has three parts, q, k and v: my rows of each third.
enum class Cut { kRows, kColumns, kWhole };
struct Piece {
  std::string name;               // the unsplit layer's: "self_attn.in_proj_weight"
  std::vector<at::Tensor> parts;  // this rank's parameters holding it
  Cut cut;
};

// What both layers hold: the self-attention, the feed-forward (linear1,
// the activation, dropout, linear2), norm1 and norm2, cut from the unsplit
// layer `full` (a TransformerEncoderLayer or TransformerDecoderLayer).
class ParallelLayerBase : public torch::nn::Module {
 public:
  // The parameters every rank holds whole (the norms, the row-parallel
  // biases): partial gradients under sequence parallelism.
  std::vector<at::Tensor> replicated_parameters() const;
  // The unsplit layer's parameters (its names: self_attn.in_proj_weight,
  // ...), gathered from every rank's part, or with `gradients` their .grad
  // (undefined ones as zeros); every rank of the group calls it.
  std::map<std::string, at::Tensor> whole_state(bool gradients = false);
  // The reverse: this rank's parts cut from the unsplit layer's state (a
  // checkpoint written by any tensor size). Throws std::invalid_argument
  // naming a missing name or a size that does not split.
  void load_whole_state(const std::map<std::string, at::Tensor>& whole);
  // Every piece of the unsplit layer and where it lives here.
  virtual std::vector<Piece> pieces() const;
  // The generators the forward draws from besides the default ones (the
  // masks drawn alike on the group): what a recomputation of the layer
  // must set back (memory::checkpoint's `also`).
  std::vector<at::Generator> own_generators() const;

  // A layer whose feed-forward was replaced by a module of its own (a
  // mixture of experts, registered in the unsplit layer as "moe", its
  // linear1 and linear2 gone) keeps that module whole on every rank of the
  // group, as one more replicated piece ("moe.<name>"): every rank runs it
  // on its own input (the whole tokens; under sequence parallelism its
  // rows, the gradients then summed as the norms' are). `forward` is how to
  // run it; the layer refuses to run without it.
  void set_feed_forward(std::function<at::Tensor(const at::Tensor&)> forward);

  ParallelAttention self_attn{nullptr};
  ColumnParallelLinear linear1{nullptr};  // null when the feed-forward is a module of its own
  RowParallelLinear linear2{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};

 protected:
  template <typename Full>
  ParallelLayerBase(Communicator& group, const Full& full, ParallelOptions options, const std::string& who);
  // linear2(dropout(activation(linear1(x)))): one region, in and out.
  at::Tensor feed_forward(const at::Tensor& x);
  // The unsplit layer's dropout, in training: inside a region (my masks)
  // and between the regions (the group's masks; see above).
  at::Tensor dropped(const at::Tensor& x);
  at::Tensor dropped_alike(const at::Tensor& x);

  Communicator& group_;
  ParallelOptions options_;
  double dropout_ = 0;
  at::Generator alike_;  // the same seed on every rank of the group (dropout > 0, no sequence parallelism)
  bool gelu_ = false;  // else relu, the default
  std::shared_ptr<torch::nn::Module> own_feed_forward_;  // the unsplit layer's "moe", whole
  std::function<at::Tensor(const at::Tensor&)> run_own_feed_forward_;
};

class ParallelEncoderLayerImpl : public ParallelLayerBase {
 public:
  ParallelEncoderLayerImpl(Communicator& group, const torch::nn::TransformerEncoderLayer& full,
                           ParallelOptions options = {});
  // src (S, N, E) whole (sequence parallel: my rows, (S/t, N, E)); src_mask
  // (S, S) over the whole sequence, or undefined. Returns src's shape.
  at::Tensor forward(const at::Tensor& src, const at::Tensor& src_mask = {});
};
TORCH_MODULE(ParallelEncoderLayer);

// The pipelining tutorial's GPT layer: a torch::nn::TransformerDecoderLayer, called as
// layer(h, h) (memory = the layer's own input):
//
//   x = norm1(tgt + dropout1(self_attn(tgt, tgt, tgt, tgt_mask)))
//   x = norm2(x + dropout2(multihead_attn(x, memory, memory, memory_mask)))
//   y = norm3(x + dropout3(linear2(dropout(activation(linear1(x))))))
//
// cut the same way: both attentions by heads (the cross-attention's query
// and memory enter the region separately), the MLP column- then
// row-parallel; three all-reduces forward, three (plus memory's) backward.
class ParallelDecoderLayerImpl : public ParallelLayerBase {
 public:
  ParallelDecoderLayerImpl(Communicator& group, const torch::nn::TransformerDecoderLayer& full,
                           ParallelOptions options = {});
  // tgt (L, N, E), memory (S, N, E): whole, or my rows under sequence
  // parallelism; the masks over the whole sequences, or undefined.
  at::Tensor forward(const at::Tensor& tgt, const at::Tensor& memory, const at::Tensor& tgt_mask = {},
                     const at::Tensor& memory_mask = {});

  std::vector<Piece> pieces() const override;

  ParallelAttention multihead_attn{nullptr};
  torch::nn::LayerNorm norm3{nullptr};
};
TORCH_MODULE(ParallelDecoderLayer);

// Under sequence parallelism, every rank's gradients of `replicated` summed
// over the group (in place; one all-reduce per tensor). A no-op otherwise.
void sync_sequence_parallel_grads(Communicator& group, const std::vector<at::Tensor>& replicated,
                                  const ParallelOptions& options);

// What whole_state() reads of a parameter: its value, or with `gradients`
// its .grad (zeros when it has none). Not a copy.
at::Tensor value_or_gradient(const at::Tensor& p, bool gradients);

// Dropout drawing the same mask on every rank of a group: `alike` is a
// generator seeded the same on all of them, by generator_alike() from a
// tensor every rank holds whole and equal (the unsplit layer's weights):
// the same on every rank, another for every layer, with neither a message
// nor a draw from the default generator (thread ranks share that one, and
// a draw here would change another rank's initial weights). The mask is
// drawn on the CPU.
at::Generator generator_alike(const at::Tensor& seed_from);
at::Tensor dropout_alike(const at::Tensor& x, double p, at::Generator& alike);

// A copy of an unsplit LayerNorm (the same shape, eps and values).
torch::nn::LayerNorm copy_layer_norm(const torch::nn::LayerNorm& full);

}  // namespace distlab::tensor_parallel
