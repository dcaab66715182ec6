#include "models/split.hpp"

#include <stdexcept>

namespace distlab::models {

std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t n_layers, int64_t stages) {
  if (stages < 1 || stages > n_layers)
    throw std::invalid_argument("split_layers: expected 1 <= stages <= n_layers so every stage holds a layer, got " +
                                std::to_string(stages) + " stages for " + std::to_string(n_layers) +
                                " layers (hint: use fewer stages or a deeper model)");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const int64_t base = n_layers / stages;
  const int64_t extra = n_layers % stages;
  int64_t first = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t end = first + base + (s < extra ? 1 : 0);
    ranges.emplace_back(first, end);
    first = end;
  }
  return ranges;
}

std::pair<int64_t, int64_t> resolve_layer_range(const std::string& model, int64_t n_layers, int64_t first_layer,
                                                int64_t end_layer) {
  const int64_t end = end_layer == -1 ? n_layers : end_layer;
  if (n_layers < 1 || first_layer < 0 || first_layer >= end || end > n_layers)
    throw std::invalid_argument(model + ": expected a layer range 0 <= first < end <= n_layers (" +
                                std::to_string(n_layers) + "), got [" + std::to_string(first_layer) + ", " +
                                std::to_string(end_layer) +
                                ") (hint: take the ranges from split_layers; end -1 means n_layers)");
  return {first_layer, end};
}

}  // namespace distlab::models
