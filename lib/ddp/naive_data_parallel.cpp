#include "ddp/naive_data_parallel.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "collectives/collectives.hpp"
#include "ddp/replicas.hpp"

namespace distlab::ddp {

void broadcast_parameters(comm::Communicator& comm, torch::nn::Module& module) {
  std::vector<at::Tensor> tensors;
  for (const auto& [name, p] : trainable_parameters(module)) tensors.push_back(p);
  for (const auto& b : module.buffers()) tensors.push_back(b);
  broadcast_from_rank0(comm, tensors);
}

void average_gradients(comm::Communicator& comm, torch::nn::Module& module, collectives::Algorithm algorithm) {
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : trainable_parameters(module)) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    collectives::all_reduce(comm, p.mutable_grad(), comm::ReduceOp::kAvg, algorithm);
  }
}

}  // namespace distlab::ddp
