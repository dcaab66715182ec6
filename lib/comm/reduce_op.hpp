// Reduction operators, and the one place that applies them to tensors, so
// that every backend and every algorithm combines values the same way.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace distlab::comm {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

const char* to_string(ReduceOp op);
// "sum", "avg", "max", "min"; throws std::invalid_argument listing them.
ReduceOp parse_reduce_op(const std::string& name);

// acc = acc (op) in, elementwise. kAvg combines as a sum: call finish_average
// once all contributions are in.
void combine_into(at::Tensor& acc, const at::Tensor& in, ReduceOp op);
// For kAvg divides by world_size (integers round toward zero); no-op otherwise.
void finish_average(at::Tensor& tensor, ReduceOp op, int world_size);

}  // namespace distlab::comm
