// Helpers shared by the model tests.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace distlab::models::testing {

inline std::vector<std::string> parameter_names(const torch::nn::Module& module) {
  return module.named_parameters().keys();
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace distlab::models::testing
