// What each rank of a layout holds at its peak, by category, predicted from
// the sizes alone (no model built).
//
//   parameters       the weights of the stages the rank holds: the
//                    embedding (V d) on the first stage, each layer's
//                    4d^2 + 2df + 9d + f (in_proj 3d^2 + 3d, out_proj
//                    d^2 + d, linear1 fd + f, linear2 df + d, two norms
//                    4d), the decoder's V d + V on the last; a tensor
//                    group of T cuts in_proj, out_proj's weight, linear1
//                    and linear2's weight by T (train/cut_layers.hpp:
//                    the embedding, the decoder, the norms and the
//                    row-parallel biases stay whole); ZeRO-3 keeps 1/(R C)
//                    of them between uses
//   gradients        one float32 per parameter (.grad, summed over the
//                    microbatches); ZeRO-2 and -3 hold 1/(R C) of them from
//                    the start (gradient_shard), and the whole .grad only
//                    while the microbatches accumulate (no_sync): counted
//                    when a later backward's moment is the peak; in
//                    ZeRO-2's backward that reduces, what .grad still
//                    holds and the bucket being filled (one reduce-scatter
//                    in flight: the earlier buckets have landed), beside
//                    the embedding's or the decoder's new gradient
//   optimizer state  the trainer's SGD keeps none (K = 0 bytes a
//                    parameter; momentum would be 4, Adam 8): per ZeRO-1+,
//                    1/(R C) of K Psi
//   buffers          the positional table (max_len x d floats, first
//                    stage); DDP's buckets, a float32 copy of every
//                    gradient (ddp/reducer.hpp), made even for a group of
//                    one; ZeRO-1's flat buckets, made with the stage,
//                    which are its .grad (not counted again as
//                    gradients); the ring's scratch a ZeRO stage's
//                    reduce-scatters keep (collectives/executor.hpp)
//   activations      what a microbatch's forward keeps for its backward on
//                    a stage (models/encoder_layer.hpp's activation_bytes
//                    per layer, by recomputation policy and precision;
//                    tensor_parallel/memory.hpp's with T > 1), the stage's
//                    received input, the first stage's embedding and the
//                    last stage's logits and their log-softmax (2 s b V
//                    floats), times the microbatches the schedule holds at
//                    once on that stage (pipeline/simulator.hpp's
//                    peak_activations)
//   backward scratch what the backward's first steps make while the
//                    forward's tensors are all still kept, the step's peak:
//                    on the rank holding the last stage the
//                    log-probabilities' gradient and the logits' (2 s b V
//                    floats, float32 in every precision: the log-softmax
//                    runs in float32); on another, the gradient received
//                    for the stage's output and the one flowing from it
//                    (s b d floats each; after the first stage also the
//                    input's, sent back) and the largest weight's gradient
//                    before it is added into .grad (f d / T floats), and
//                    under recomputation the layer's tensors made again
//                    (what the policy had dropped). On
//                    the first stage the embedding's backward can be the
//                    peak instead: its dense V x d gradient made while the
//                    other microbatches' activations are kept and this
//                    one's layers are already freed
//   data             the corpus as the trainer batchifies it on every
//                    rank (int64): the replica's columns of the training
//                    matrix, the validation and test matrices whole; at
//                    set-up the whole training matrix too, while the
//                    replica's columns are cut out of it (the rank's
//                    peak is the larger of set-up and training)
//   build            before that, each stage is built from the whole
//                    model's initial weights (train/stage_model.cpp): the
//                    whole model and its positional table beside the part
//                    being copied, and the parts built before it (a rank of
//                    several stages); unless the model is past
//                    kWholeModelInitLimit parameters or has one stage
//
// Against what build_rank allocates (tests/planner, the allocator meter):
// parameters, buffers and the gradient shard exact to the byte on one
// rank; with more, each rank's groups add a few dozen bytes of their own,
// not modelled. Derived, not measured: ZeRO-2's whole .grad during
// accumulation, ZeRO-3's gathered units (not counted), and activations
// with T > 1 or C > 1 (the layer formulas are
// for t = 1 tokens on one rank; ring attention's blocks are approximated by
// the layer's own terms over s/C tokens).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model_shape.hpp"

namespace distlab::planner {

struct RankMemory {
  int pipeline_rank = 0;
  int64_t parameters = 0, gradients = 0, gradient_shard = 0, optimizer_state = 0, buffers = 0, activations = 0;
  int64_t backward_scratch = 0;  // at the backward's first steps (the loss's on the last stage)
  int64_t data = 0;        // the batches kept through training
  int64_t data_setup = 0;  // the whole training matrix, alive at set-up only
  int64_t build = 0;       // while the rank's stages are built (before the corpus is batchified)
  int microbatches_held = 0;  // the schedule's peak on the rank's stages, all of them together
  // What the rank holds while it trains, and at set-up (the model built, no
  // gradients or activations yet, the training matrix whole beside its cut).
  int64_t training() const {
    return parameters + gradients + gradient_shard + optimizer_state + buffers + activations + backward_scratch + data;
  }
  int64_t setup() const { return parameters + gradient_shard + optimizer_state + buffers + data + data_setup; }
  int64_t total() const { return std::max({training(), setup(), build}); }
};

// The corpus's bytes on one rank of a replica group of `replicas` (the
// first replica: it gets the extra column when they do not divide):
// through training, and the whole training matrix at set-up.
struct DataBytes {
  int64_t kept = 0, setup = 0;
};
DataBytes data_bytes(const ModelShape& model, int replicas);

struct MemoryPrediction {
  std::vector<RankMemory> ranks;  // one per pipeline rank (the other axes hold the same)
  const RankMemory& worst() const;
};

// The elements of stage `stage` of `stages` (an even split of the layers,
// models/split.hpp) on one tensor rank of T, with experts spread over N.
int64_t stage_parameters(const ModelShape& model, int stage, int stages, int tensor, int experts_over);

// Bytes one microbatch of `columns` columns leaves on stage `stage` for its
// backward, on one rank of the layout.
int64_t stage_activation_bytes(const ModelShape& model, const Choice& choice, int stage, int64_t columns);

// The header's backward scratch of stage `stage` for a microbatch of `columns`.
int64_t backward_scratch_bytes(const ModelShape& model, const Choice& choice, int stage, int64_t columns);

// The header's build on pipeline rank `rank`.
int64_t build_bytes(const ModelShape& model, const Choice& choice, int rank);

MemoryPrediction predict_memory(const ModelShape& model, const Choice& choice);

// "1.5 GB", "12.3 MB", "640 KB", "512 B"; and the inverse ("2GB", "512M",
// "1.5 GiB"), throwing std::invalid_argument naming the forms it reads.
std::string bytes_text(int64_t bytes);
int64_t parse_bytes(const std::string& text);

}  // namespace distlab::planner
