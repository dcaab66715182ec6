#include "comm/reduce_op.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

namespace distlab::comm {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "avg" || name == "mean") return ReduceOp::kAvg;
  if (name == "max") return ReduceOp::kMax;
  if (name == "min") return ReduceOp::kMin;
  throw std::invalid_argument("unknown reduce op '" + name + "' (expected sum, avg, max or min)");
}

void combine_into(at::Tensor& acc, const at::Tensor& in, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: acc.add_(in); break;
    case ReduceOp::kMax: at::maximum_out(acc, acc, in); break;
    case ReduceOp::kMin: at::minimum_out(acc, acc, in); break;
  }
}

void finish_average(at::Tensor& tensor, ReduceOp op, int world_size) {
  if (op != ReduceOp::kAvg || world_size == 1) return;
  if (at::isFloatingType(tensor.scalar_type()))
    tensor.div_(world_size);
  else
    tensor.div_(world_size, "trunc");
}

}  // namespace distlab::comm
