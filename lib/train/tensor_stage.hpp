// A pipeline stage of the capstone's Transformer LM with its layers cut
// across a tensor group, and its sequences split across a context group:
// the third and fourth dimensions of the capstone's layout (pipeline x data
// x context x tensor).
//
// Built from the unsplit stage (train/stage_model.hpp's build_stage, the
// same weights on every rank): each TransformerEncoderLayer becomes a
// ParallelEncoderLayer (lib/tensor_parallel/layer.hpp: heads and
// feed-forward split), while the embedding, the positional table and the
// decoder stay whole on every rank of the group (they are small next to
// the layers at the capstone's sizes; the vocabulary-parallel pair of
// tensor_parallel/vocab.hpp is the way to split them). The activations
// between the layers are whole on every tensor rank, so the pipeline sends
// them from each tensor rank to the same tensor rank of the next stage.
//
// The embedding's dropout draws the same masks on every rank of the group
// (tensor_parallel::dropout_alike), as the layers' dropouts between their
// regions do: what enters the layers is the same on every tensor rank.
//
// With a context group of C > 1 ranks (ContextSplit) each rank holds some
// of every sequence's tokens (its chunks, contiguous or zigzag:
// context_parallel/ring_plan.hpp): (S/C, N) tokens on the first stage,
// (S/C, N, d) hidden states between. The embedding adds each token's own
// position (positions_of(layout, S, C, rank)), and each layer's attention
// core attends its tokens to the whole sequence across the group
// (context_parallel/context_attention.hpp), causal by position; everything
// else in a layer works token by token and needs no change. The attention
// weights get no dropout then (ContextSplit's note).
//
// With the unsplit model's recompute policy (memory/recompute.hpp) full,
// each cut layer is one recomputed region: its backward runs the layer
// again, its tensor collectives (and context exchanges) with it, and the
// masks it draws alike on the group from the same generator state (the
// layer's own_generators()); selective recomputes each layer's attention
// core (ParallelAttention::set_recompute_core). matmuls is refused: it
// keeps the products of the whole, unsplit layer.
//
// forward() computes what the unsplit stage computes. whole_state() gives
// the unsplit stage's parameters by its names (the layers gathered), and
// load_whole_state() cuts them again: a checkpoint is the unsplit model's,
// whatever the tensor size that wrote it.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <string>
#include <vector>

#include "context_parallel/context_attention.hpp"
#include "context_parallel/ring_plan.hpp"
#include "models/transformer_lm.hpp"
#include "tensor_parallel/layer.hpp"

namespace distlab::train {

// How a stage's sequences split across its context group.
struct ContextSplit {
  comm::Communicator* group = nullptr;  // the stage's context ranks (this tensor rank's); null: none
  context_parallel::Layout layout = context_parallel::Layout::kZigzag;
  context_parallel::Method method = context_parallel::Method::kRing;
  bool active() const { return group != nullptr && group->size() > 1; }
  // The positions (S_local,) of this rank's tokens when it holds `local` of each sequence's.
  at::Tensor positions(int64_t local) const;
};

class TensorParallelStageImpl : public torch::nn::Module {
 public:
  // `tensor`: this stage's tensor group; `unsplit`: the stage, the same on
  // every rank of the group (its embedding and decoder are shared, not copied).
  // `context`: the stage's context group, if its sequences split.
  TensorParallelStageImpl(comm::Communicator& tensor, models::TransformerLm unsplit, ContextSplit context = {});

  // As the unsplit stage: tokens (S, N) on the first stage, hidden states
  // between, logits (S, N, ntokens) from the last.
  at::Tensor forward(const at::Tensor& input);
  // The same as a chain of units (embedding, each cut layer, decoder), as
  // TransformerLm::units(): what ZeRO-3 gathers one at a time.
  torch::nn::Sequential units();

  // The unsplit stage's parameters (or their gradients) by its names:
  // "encoder.weight", "layers.3.self_attn.in_proj_weight", ...; every rank
  // of the group calls it.
  std::map<std::string, at::Tensor> whole_state(bool gradients = false);
  void load_whole_state(const std::map<std::string, at::Tensor>& whole);

  // What the norm of the whole model must count once (replicated on the
  // group: the embedding, the decoder, the layers' norms and biases) and
  // what it must sum over the group (the layers' cut matrices).
  std::vector<at::Tensor> replicated_parameters() const;
  std::vector<at::Tensor> split_parameters() const;

  const models::TransformerLm& unsplit() const { return unsplit_; }

 private:
  at::Tensor enter(const at::Tensor& input);  // tokens embedded (first stage), or hidden states checked
  at::Tensor run_layer(size_t k, const at::Tensor& h);  // with the causal mask, or the context core's rule

  comm::Communicator& tensor_;
  ContextSplit context_;
  models::TransformerLm unsplit_;
  std::vector<int64_t> indices_;  // the layers' global numbers
  std::vector<tensor_parallel::ParallelEncoderLayer> layers_;
  at::Generator alike_;  // the embedding's dropout, the same masks on every tensor rank
};
TORCH_MODULE(TensorParallelStage);

}  // namespace distlab::train
