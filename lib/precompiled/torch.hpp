// The precompiled header of the library's files that reach torch::nn or
// torch::optim (DISTLAB_NN_SOURCES), and of every program that links the
// library: the lessons, the benchmark and (with GoogleTest, tests.hpp) the
// tests. See README.md here.
#pragma once

#include "tensors.hpp"

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
