#include "train/grad_clip.hpp"

#include <ATen/ATen.h>

#include <cmath>

namespace distlab::train {

namespace {

// Sum of squares in float64 on the parameters' device: (1,)
at::Tensor sum_of_squares(const std::vector<at::Tensor>& parameters, const at::Device& device) {
  at::Tensor total = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
  for (const auto& p : parameters)
    if (p.grad().defined()) total += p.grad().to(at::kDouble).pow(2).sum();
  return total;
}

void scale(const std::vector<at::Tensor>& parameters, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  at::NoGradGuard no_grad;
  for (const auto& p : parameters)
    if (p.grad().defined()) p.grad().mul_(coef);
}

}  // namespace

double clip_grad_norm(comm::Communicator& pipeline, const std::vector<at::Tensor>& parameters, double max_norm) {
  at::Tensor total = sum_of_squares(parameters, pipeline.device());
  if (pipeline.size() > 1) pipeline.native_all_reduce(total);
  const double norm = std::sqrt(total.cpu().item<double>());
  scale(parameters, norm, max_norm);
  return norm;
}

double clip_grad_norm_sharded(comm::Communicator& pipeline, comm::Communicator& replicas,
                              const std::vector<at::Tensor>& shard, double max_norm) {
  at::Tensor total = sum_of_squares(shard, pipeline.device());  // this rank's chunks of its stage
  if (replicas.size() > 1) replicas.native_all_reduce(total);    // the stage's whole gradient
  if (pipeline.size() > 1) pipeline.native_all_reduce(total);    // the whole model's
  const double norm = std::sqrt(total.cpu().item<double>());
  scale(shard, norm, max_norm);
  return norm;
}

double clip_grad_norm_tensor_parallel(comm::Communicator& pipeline, comm::Communicator& tensor,
                                      const std::vector<at::Tensor>& replicated, const std::vector<at::Tensor>& split,
                                      double max_norm) {
  at::Tensor total = sum_of_squares(split, pipeline.device());  // my parts of the cut matrices
  if (tensor.size() > 1) tensor.native_all_reduce(total);       // the stage's whole cut matrices
  total += sum_of_squares(replicated, pipeline.device());        // counted once: every tensor rank holds them
  if (pipeline.size() > 1) pipeline.native_all_reduce(total);   // the whole model's
  const double norm = std::sqrt(total.cpu().item<double>());
  scale(split, norm, max_norm);
  scale(replicated, norm, max_norm);
  return norm;
}

double clip_grad_norm_local(const std::vector<at::Tensor>& parameters, double max_norm) {
  const at::Device device = parameters.empty() ? at::Device(at::kCPU) : parameters.front().device();
  const double norm = std::sqrt(sum_of_squares(parameters, device).cpu().item<double>());
  scale(parameters, norm, max_norm);
  return norm;
}

}  // namespace distlab::train
