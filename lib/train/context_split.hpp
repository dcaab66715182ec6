// The context dimension of the capstone's layout: a stage's sequences split
// across its context group.
//
// With a context group of C > 1 ranks each rank holds some of every
// sequence's tokens (its chunks, contiguous or zigzag:
// context_parallel/ring_plan.hpp): (S/C, N) tokens on the first stage,
// (S/C, N, d) hidden states between. The embedding adds each token's own
// position (positions_of(layout, S, C, rank)), and each layer's attention
// core attends its tokens to the whole sequence across the group
// (context_parallel/context_attention.hpp), causal by position; everything
// else in a layer works token by token and needs no change, experts
// included (a rank routes its own tokens). The attention weights get no
// dropout then (the context core has none).
//
// split_sequences() does this to a stage whose layers are cut
// (train/cut_layers.hpp, over a tensor group of one rank if need be): the
// cut layers' attention is the one whose core can be replaced.
#pragma once

#include <ATen/ATen.h>

#include "comm/communicator.hpp"
#include "context_parallel/ring_plan.hpp"
#include "context_parallel/context_attention.hpp"
#include "models/transformer_lm.hpp"
#include "train/cut_layers.hpp"

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

// `stage` (its layers cut: `cut`) takes this rank's tokens of each sequence.
void split_sequences(models::TransformerLm& stage, CutLayers& cut, const ContextSplit& context);

}  // namespace distlab::train
