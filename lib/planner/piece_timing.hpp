// How the calibration runs and times a piece of the model (pieces.hpp,
// cut_pieces.hpp): the capstone's model with one layer, a piece's forward
// and backward timed as the trainer runs them, and the step's update.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <functional>

#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "models/transformer_lm.hpp"
#include "planner/model_shape.hpp"

namespace distlab::planner {

// The capstone's model with one layer, in training mode: its units
// (models/transformer_lm.hpp) are embedding, layer0, decoder.
models::TransformerLm piece_model(const ModelShape& model, memory::Recompute policy);
torch::nn::AnyModule& unit(torch::nn::Sequential& units, size_t i);

// The median forward and backward seconds of `piece` on `input` (a fresh
// leaf when it is a float tensor) under the precision's autocast, the
// backward from `loss` of its output, adding into the gradients the
// earlier runs left (the trainer's microbatches accumulate theirs, and
// adding reads and writes every gradient: a tenth of a millisecond to a few
// per piece, a third more for the embedding's whole table). With `split`, the backward also as
// a zero-bubble schedule's I and W (pipeline/executor.cpp): the input's
// gradient keeping the graph, then the parameters' gradients through it
// again (no I for an integer input: the first stage returns no gradient).
// Runs at least 6 times (the first not kept: first touches, the
// allocator's caches) and until `seconds` are timed, at most 64: with
// `seconds` 0 exactly 6, the same count on every rank of a group whose
// piece talks.
struct Timed {
  double forward = 0, backward = 0;
  double input = 0, weight = 0;  // with `split`
};
Timed time_piece(torch::nn::AnyModule& piece, const at::Tensor& input, memory::Precision precision,
                 const std::function<at::Tensor(const at::Tensor&)>& loss, double seconds, bool split);

// The clipping's norm and SGD's step over the piece's parameters, as a step ends.
double time_update(torch::nn::AnyModule& piece, double seconds);

}  // namespace distlab::planner
