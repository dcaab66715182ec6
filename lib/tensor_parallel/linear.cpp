#include "tensor_parallel/linear.hpp"

#include <ATen/ATen.h>

#include "tensor_parallel/split.hpp"

namespace distlab::tensor_parallel {

at::Tensor my_part(const Communicator& group, const at::Tensor& whole, int64_t dim, const std::string& what) {
  const int64_t size = split_evenly(what, whole.size(dim), group.size());
  return whole.narrow(dim, group.rank() * size, size).clone();
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(Communicator& group, const at::Tensor& full_weight,
                                                   const at::Tensor& full_bias, ParallelOptions options)
    : group_(group), options_(options) {
  const std::string what = "ColumnParallelLinear: " + std::to_string(full_weight.size(0)) + " output features";
  weight = register_parameter("weight", my_part(group, full_weight.detach(), 0, what));
  if (full_bias.defined()) bias = register_parameter("bias", my_part(group, full_bias.detach(), 0, what));
}

at::Tensor ColumnParallelLinearImpl::forward(const at::Tensor& x) {
  const at::Tensor input = options_.sequence_parallel ? gather_from_sequence_region(group_, x) : copy_to_region(group_, x);
  return at::linear(input, weight, bias);
}

RowParallelLinearImpl::RowParallelLinearImpl(Communicator& group, const at::Tensor& full_weight,
                                             const at::Tensor& full_bias, ParallelOptions options)
    : group_(group), options_(options) {
  const std::string what = "RowParallelLinear: " + std::to_string(full_weight.size(1)) + " input features";
  weight = register_parameter("weight", my_part(group, full_weight.detach(), 1, what));
  if (full_bias.defined()) bias = register_parameter("bias", full_bias.detach().clone());
}

at::Tensor RowParallelLinearImpl::forward(const at::Tensor& x) {
  const at::Tensor partial = at::linear(x, weight);
  at::Tensor y = options_.sequence_parallel ? reduce_scatter_to_sequence_region(group_, partial) : reduce_from_region(group_, partial);
  return bias.defined() ? y + bias : y;
}

}  // namespace distlab::tensor_parallel
