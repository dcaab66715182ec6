// The tensor-parallel linears the plain way, small enough to read on one
// screen: gather the whole weight, compute the whole output, keep my slice.
// Every rank does the whole layer's work and holds the whole weight for a
// moment, so nothing is saved; it is the reference the tests hold the real
// ones (linear.hpp) against, forward values only (no autograd).
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"

namespace distlab::tensor_parallel {

// Every rank's `part` joined along `dim` in rank order (an all-gather).
at::Tensor gather_parts(comm::Communicator& group, const at::Tensor& part, int64_t dim);

// ColumnParallelLinear's output on this rank: my columns of x W^T + b, W and
// b gathered from every rank's rows.
at::Tensor naive_column_parallel(comm::Communicator& group, const at::Tensor& x, const at::Tensor& weight_rows,
                                 const at::Tensor& bias_rows);

// RowParallelLinear's output: x (my feature slice) and W (my columns)
// gathered whole, then x W^T + b.
at::Tensor naive_row_parallel(comm::Communicator& group, const at::Tensor& x_part, const at::Tensor& weight_columns,
                              const at::Tensor& bias);

}  // namespace distlab::tensor_parallel
