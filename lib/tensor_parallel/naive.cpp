#include "tensor_parallel/naive.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <vector>

#include "collectives/collectives.hpp"

namespace distlab::tensor_parallel {

at::Tensor gather_parts(comm::Communicator& group, const at::Tensor& part, int64_t dim) {
  at::NoGradGuard no_grad;
  const int64_t d = dim < 0 ? dim + part.dim() : dim;
  const at::Tensor front = part.movedim(d, 0).contiguous();  // rank order along dim 0 is contiguous
  std::vector<int64_t> sizes = front.sizes().vec();
  sizes[0] *= group.size();
  at::Tensor whole = at::empty(sizes, front.options());
  collectives::all_gather(group, front, whole);
  return whole.movedim(0, d).contiguous();
}

at::Tensor naive_column_parallel(comm::Communicator& group, const at::Tensor& x, const at::Tensor& weight_rows,
                                 const at::Tensor& bias_rows) {
  at::NoGradGuard no_grad;
  const at::Tensor weight = gather_parts(group, weight_rows, 0);
  const at::Tensor bias = bias_rows.defined() ? gather_parts(group, bias_rows, 0) : at::Tensor();
  const at::Tensor y = at::linear(x, weight, bias);
  const int64_t mine = weight_rows.size(0);
  return y.narrow(-1, group.rank() * mine, mine).contiguous();
}

at::Tensor naive_row_parallel(comm::Communicator& group, const at::Tensor& x_part, const at::Tensor& weight_columns,
                              const at::Tensor& bias) {
  at::NoGradGuard no_grad;
  const at::Tensor x = gather_parts(group, x_part, -1);
  const at::Tensor weight = gather_parts(group, weight_columns, 1);
  return at::linear(x, weight, bias);
}

}  // namespace distlab::tensor_parallel
