#include "zero/optimizer_factory.hpp"

namespace distlab::zero {

// fp32 state: one tensor the size of the parameters is 4 bytes per parameter.
OptimizerFactory sgd(torch::optim::SGDOptions options) {
  return {[options](std::vector<at::Tensor> params) {
            return std::make_unique<torch::optim::SGD>(std::move(params), options);
          },
          options.momentum() != 0 ? 4 : 0};
}

OptimizerFactory adam(torch::optim::AdamOptions options) {
  return {[options](std::vector<at::Tensor> params) {
            return std::make_unique<torch::optim::Adam>(std::move(params), options);
          },
          options.amsgrad() ? 12 : 8};
}

OptimizerFactory adamw(torch::optim::AdamWOptions options) {
  return {[options](std::vector<at::Tensor> params) {
            return std::make_unique<torch::optim::AdamW>(std::move(params), options);
          },
          options.amsgrad() ? 12 : 8};
}

}  // namespace distlab::zero
