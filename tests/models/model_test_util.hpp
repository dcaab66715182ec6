// Helpers shared by the model tests.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "support/differences.hpp"

namespace distlab::models::testing {

inline std::vector<std::string> parameter_names(const torch::nn::Module& module) {
  return module.named_parameters().keys();
}

// The largest |a - b|; +infinity for a NaN or a shape that differs, so a
// broken model fails every `<= tolerance` (support/differences.hpp).
inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return test_support::largest_difference(a, b);
}

}  // namespace distlab::models::testing
