#include "zero/naive_zero.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "collectives/collectives.hpp"
#include "ddp/replicas.hpp"

namespace distlab::zero {

NaiveZero1::NaiveZero1(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
                       collectives::Algorithm all_reduce, collectives::Algorithm all_gather)
    : comm_(comm), all_reduce_(all_reduce), all_gather_(all_gather) {
  const auto named = ddp::trainable_parameters(module);
  ddp::verify_same_parameters(comm_, named, "naive ZeRO-1");
  params_ = ddp::tensors_of(named);
  ddp::broadcast_from_rank0(comm_, params_);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : params_) flat.push_back(p.reshape({-1}));
  const at::Tensor all = at::cat(flat);  // (n,) every parameter, in registration order
  n_ = all.numel();
  mine_ = collectives::chunk_range(n_, comm_.size(), comm_.rank());
  slice_ = all.narrow(0, mine_.offset, mine_.count).clone().requires_grad_(true);
  optimizer_ = make_optimizer({slice_});
}

void NaiveZero1::zero_grad() {
  for (const at::Tensor& p : params_) p.mutable_grad() = at::Tensor();
}

void NaiveZero1::step(double max_grad_norm) {
  reduce_and_step_slice(max_grad_norm);
  gather_into_parameters();
}

void NaiveZero1::reduce_and_step_slice(double max_grad_norm) {
  torch::NoGradGuard no_grad;
  // 1. Everyone's average gradient, whole: (n,).
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params_)
    grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : at::zeros({p.numel()}, p.options()));
  at::Tensor grad = at::cat(grads);
  collectives::all_reduce(comm_, grad, comm::ReduceOp::kAvg, all_reduce_);
  if (max_grad_norm > 0) {
    const double norm = grad.to(at::kDouble).norm().item<double>();
    if (max_grad_norm / (norm + 1e-6) < 1.0) grad.mul_(max_grad_norm / (norm + 1e-6));
  }

  // 2. Step my slice with my slice of the gradient.
  slice_.mutable_grad() = grad.narrow(0, mine_.offset, mine_.count);
  optimizer_->step();
}

void NaiveZero1::gather_into_parameters() {
  torch::NoGradGuard no_grad;
  // 3. Everyone's updated slice, whole: (n,), then back into the parameters.
  at::Tensor all = at::empty({n_}, slice_.options());
  all.narrow(0, mine_.offset, mine_.count).copy_(slice_);
  collectives::all_gather(comm_, all, all_gather_);
  int64_t offset = 0;
  for (const at::Tensor& p : params_) {
    p.copy_(all.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

NaiveZero3::NaiveZero3(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
                       collectives::Algorithm algorithm)
    : NaiveZero1(comm, module, make_optimizer, algorithm, algorithm) {
  for (const at::Tensor& p : params_) shapes_.push_back(p.sizes().vec());
  release();
}

void NaiveZero3::gather() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(at::empty(shapes_[i], slice().options()));
  gather_into_parameters();
}

void NaiveZero3::step(double max_grad_norm) {
  reduce_and_step_slice(max_grad_norm);
  release();
}

// Each parameter keeps its identity (and the optimizer's view of the model)
// but holds no elements: its memory goes back.
void NaiveZero3::release() {
  for (const at::Tensor& p : params_) p.set_data(at::empty({0}, p.options()));
}

}  // namespace distlab::zero
