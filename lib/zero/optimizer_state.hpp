// One parameter's state inside a LibTorch optimizer, by field name, read
// and written from outside: what a checkpoint of a ZeRO shard saves for each
// chunk and puts back into a new rank's chunks.
//
//   SGD (with momentum)   momentum_buffer
//   Adam, AdamW           exp_avg, exp_avg_sq (max_exp_avg_sq with amsgrad), step
//
// Every field has the parameter's shape and holds one value per element
// (optimizer_factory.hpp: why that makes sharding exact), so a field of a
// chunk can be cut and joined like the chunk itself. LibTorch makes a
// parameter's state at its first step; before that there is none.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <map>
#include <string>

namespace distlab::zero {

enum class OptimizerKind { kSgd, kAdam, kAdamW };
std::string to_string(OptimizerKind kind);  // "sgd", "adam", "adamw"
// Throws std::invalid_argument, starting with `who`, for any other optimizer.
OptimizerKind optimizer_kind(torch::optim::Optimizer& optimizer, const std::string& who);

struct ElementState {
  bool present = false;  // false before the parameter's first step
  int64_t step = 0;      // Adam's and AdamW's step count
  std::map<std::string, at::Tensor> fields;  // each the parameter's shape, by name ("exp_avg", ...)
};

// `param` is one of the optimizer's parameters. The fields share the
// optimizer's tensors: clone to keep them.
ElementState element_state(torch::optim::Optimizer& optimizer, OptimizerKind kind, const at::Tensor& param);
// Replaces param's state (state.present false: removes it, as before a first step).
void set_element_state(torch::optim::Optimizer& optimizer, OptimizerKind kind, const at::Tensor& param,
                       const ElementState& state);

}  // namespace distlab::zero
