// Helpers shared by the model tests: copying weights between modules by name
// and listing names.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace distlab::models::testing {

// Every parameter and buffer of `to` takes the value of the same-named one
// in `from`; fails the test for a name `from` lacks or a shape that differs.
inline void copy_by_name(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto from_parameters = from.named_parameters();
  const auto from_buffers = from.named_buffers();
  for (auto& item : to.named_parameters()) {
    const at::Tensor* source = from_parameters.find(item.key());
    ASSERT_NE(source, nullptr) << "parameter " << item.key() << " is not in the whole model";
    ASSERT_EQ(source->sizes(), item.value().sizes()) << item.key();
    item.value().copy_(*source);
  }
  for (auto& item : to.named_buffers()) {
    const at::Tensor* source = from_buffers.find(item.key());
    ASSERT_NE(source, nullptr) << "buffer " << item.key() << " is not in the whole model";
    item.value().copy_(*source);
  }
}

inline std::vector<std::string> parameter_names(const torch::nn::Module& module) {
  return module.named_parameters().keys();
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace distlab::models::testing
