#include "train/stage_model.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <mutex>
#include <stdexcept>

#include "models/copy_state.hpp"
#include "models/split.hpp"

namespace distlab::train {

models::TransformerLm build_stage(const models::TransformerLmOptions& options, int stage, int stages, uint64_t seed) {
  if (stages < 1 || stages > options.nlayers || stage < 0 || stage >= stages)
    throw std::invalid_argument("stage " + std::to_string(stage) + " of " + std::to_string(stages) + ": the model has " +
                                std::to_string(options.nlayers) + " layers; use at most " +
                                std::to_string(options.nlayers) + " pipeline stages (--pipeline) or a larger preset");
  const auto [first, end] = models::split_layers(options.nlayers, stages)[static_cast<size_t>(stage)];
  static std::mutex generator_mutex;  // one default generator for all thread ranks
  std::lock_guard<std::mutex> lock(generator_mutex);
  if (models::count_parameters(options) > kWholeModelInitLimit) {
    torch::manual_seed(seed + static_cast<uint64_t>(stage));
    return models::TransformerLm(options, first, end);
  }
  torch::manual_seed(seed);
  models::TransformerLm whole(options);
  models::TransformerLm part(options, first, end);
  if (stages > 1) models::copy_state_by_name(*whole, *part);
  return stages > 1 ? part : whole;
}

}  // namespace distlab::train
