// What every replica-based method shares: which parameters take part, a
// check that every rank holds the same ones, and rank 0's values for all.
//
// Naive data parallelism, DistributedDataParallel and ZeRO (lib/zero) all
// start the same way:
//
//   auto named = trainable_parameters(module);          // which tensors
//   verify_same_parameters(comm, named, "ZeRO-1");        // same on every rank
//   broadcast_from_rank0(comm, tensors_of(named));         // same values
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::ddp {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The parameters to synchronize: requires_grad, each tensor once (a
// parameter shared by two submodules keeps its first name), in
// registration order.
NamedTensors trainable_parameters(const torch::nn::Module& module);

// The tensors of `named`, in its order.
std::vector<at::Tensor> tensors_of(const NamedTensors& named);

// Throws comm::CommError on every rank unless all ranks of `comm` hold the
// same names, shapes and dtypes; the message starts with `who` (the method
// that needs them equal), names the first parameter that differs and which
// ranks agree with rank 0, and where(i) (when given) says where parameter i
// sits, e.g. "in ZeRO-3 unit 1 of 2".
void verify_same_parameters(comm::Communicator& comm, const NamedTensors& named,
                            const std::string& who = "DistributedDataParallel",
                            const std::function<std::string(size_t index)>& where = {});

// Rank 0's values into every rank's tensors (in place, no autograd).
void broadcast_from_rank0(comm::Communicator& comm, const std::vector<at::Tensor>& tensors);

}  // namespace distlab::ddp
