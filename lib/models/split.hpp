// The pipelining tutorial's manual split: a stage is a contiguous range of a model's layers,
// [first, end); the first stage also holds the embedding, the last the output.
// These helpers only compute ranges; the models build what a range names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace distlab::models {

// [first, end) layer ranges of an even manual split into `stages` parts
// (the pipelining tutorial: 8 layers, 2 stages -> [0,4), [4,8)). When n_layers is not a
// multiple of stages the first n_layers % stages stages get one layer more
// (5 layers, 2 stages -> [0,3), [3,5)). The DDP + Pipe tutorial instead gives every stage
// ceil(n/p) layers, which can leave the last stages empty (5 layers on 4
// GPUs -> 2, 2, 1, 0); here every stage gets at least one layer.
// Throws unless 1 <= stages <= n_layers.
std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t n_layers, int64_t stages);

// The checked range a model constructor builds: end_layer -1 means n_layers.
// Throws, naming `model`, unless 0 <= first_layer < end_layer <= n_layers.
std::pair<int64_t, int64_t> resolve_layer_range(const std::string& model, int64_t n_layers,
                                                int64_t first_layer, int64_t end_layer);

}  // namespace distlab::models
