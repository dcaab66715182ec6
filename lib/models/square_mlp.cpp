#include "models/square_mlp.hpp"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

namespace distlab::models {

torch::nn::Sequential square_mlp(int layers, int width, Activation activation) {
  torch::nn::Sequential model;
  for (int i = 0; i < layers; ++i) {
    model->push_back(torch::nn::Linear(width, width));
    if (activation == Activation::kReLU)
      model->push_back(torch::nn::ReLU());
    else
      model->push_back(torch::nn::Tanh());
  }
  return model;
}

}  // namespace distlab::models
