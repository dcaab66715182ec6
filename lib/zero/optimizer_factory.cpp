#include "zero/optimizer_factory.hpp"

namespace distlab::zero {

OptimizerFactory sgd(torch::optim::SGDOptions options) {
  return [options](std::vector<at::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(std::move(params), options);
  };
}

OptimizerFactory adam(torch::optim::AdamOptions options) {
  return [options](std::vector<at::Tensor> params) {
    return std::make_unique<torch::optim::Adam>(std::move(params), options);
  };
}

OptimizerFactory adamw(torch::optim::AdamWOptions options) {
  return [options](std::vector<at::Tensor> params) {
    return std::make_unique<torch::optim::AdamW>(std::move(params), options);
  };
}

}  // namespace distlab::zero
