// Which optimizer steps a ZeRO shard: the caller picks one of LibTorch's,
// with its options, and ZeRO hands it the one tensor this rank owns.
//
//   zero::Zero2 zero(comm, model.ptr(), zero::sgd(torch::optim::SGDOptions(0.1).momentum(0.9)));
//
// SGD, Adam and AdamW update each element from that element's gradient and
// state alone, so stepping a shard gives its elements exactly the update
// they would get in the whole model, and their state (momentum, Adam's m
// and v) exists only on the rank that owns them: sharded by element, for
// free. An optimizer that mixes elements (LBFGS's line search uses the
// whole gradient's norm) would not be exact on a shard, and is not offered.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace distlab::zero {

// Builds an optimizer over `params` (ZeRO passes its shard's chunks), and
// says how many bytes of state it keeps per parameter: the ZeRO paper's K
// (fp32: SGD 0, with momentum 4; Adam and AdamW 8, 12 with amsgrad), which
// the memory accounting (memory.hpp) multiplies by the parameter count.
struct OptimizerFactory {
  std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor> params)> make;
  int64_t state_bytes_per_parameter = 0;

  std::unique_ptr<torch::optim::Optimizer> operator()(std::vector<at::Tensor> params) const {
    return make(std::move(params));
  }
};

OptimizerFactory sgd(torch::optim::SGDOptions options);
OptimizerFactory adam(torch::optim::AdamOptions options);
OptimizerFactory adamw(torch::optim::AdamWOptions options);

}  // namespace distlab::zero
