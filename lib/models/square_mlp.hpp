// The plain model that the DDP and ZeRO lessons and benchmarks time:
// `layers` x (Linear(width, width), activation). Every Linear is a
// width x width weight plus a bias, so the model's size is easy to work out
// (layers x (width^2 + width) parameters) and each layer is one ZeRO-3 unit.
#pragma once

#include <torch/nn/modules/container/sequential.h>

namespace distlab::models {

enum class Activation { kReLU, kTanh };

torch::nn::Sequential square_mlp(int layers, int width, Activation activation);

}  // namespace distlab::models
