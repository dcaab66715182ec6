// The model's pieces run as the capstone runs them, timed: what a step's
// compute costs on this machine, measured rather than added up from its
// products (calibrate.hpp's matrix products and one bare operation's cost
// left out what a training step also pays: autograd's bookkeeping per
// operation, the casts of mixed precision, the backward's products of other
// shapes than the forward's, the loss's softmax over the vocabulary).
//
//   embedding  the first stage's look-up, scale, positions and dropout
//   layer      one encoder layer (models/encoder_layer.hpp), per
//              recomputation policy: its backward runs the recomputed part
//   decoder    the last stage's product to the vocabulary and the loss
//              (train/batches.hpp's lm_loss)
//
// Each built as the capstone builds a stage of it (models::TransformerLm
// over that layer range, the preset's sizes and dropout, in training mode),
// its forward under the precision's autocast (memory::ComputeIn) as the
// trainer runs a stage, its backward from a gradient of its output's shape
// (the loss, for the decoder). Measured for microbatches of 1, 2, 4, 10 and
// 20 columns of the preset's sequence, on 1 intra-op thread (a thread
// rank's share when ranks fill the cores) and on every core (one rank
// alone): the median of a few timed runs after one untimed.
//
//   update     the clipping's norm and SGD's step over a piece's
//              parameters, as a step ends
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "memory/precision.hpp"
#include "planner/model_shape.hpp"
#include "planner/profile.hpp"

namespace distlab::planner {

struct PieceOptions {
  double seconds_per_point = 0.01;  // timed per measurement, at least
  std::vector<std::string> precisions = {"fp32", "bf16"};
  std::vector<int> threads = {1};   // intra-op threads to measure on
};

// The model's sizes the pieces depend on, in words ("d 128, ffn 256, 4
// heads, vocabulary 6949, 35 tokens a column, dropout 0.2"): a profile's
// pieces are used for the model they were measured on only.
std::string pieces_model(const ModelShape& model);

// `say`: one line per precision and thread count; sets profile.pieces_model.
void measure_pieces(const ModelShape& model, const PieceOptions& options, Profile& profile,
                    const std::function<void(const std::string&)>& say);

// One encoder layer of the model (no recomputation), its forward under the
// precision's autocast and backward run `steps` times on `columns`
// columns, on the calling thread's intra-op threads: a rank's work, for
// measuring how ranks share the cores (calibrate.hpp's sharing).
void run_layer_steps(const ModelShape& model, memory::Precision precision, int64_t columns, int steps);

}  // namespace distlab::planner
