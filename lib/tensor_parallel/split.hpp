// How a tensor-parallel layer cuts a size among the tensor group, and the
// refusal when it cannot: "ColumnParallelLinear: 10 output features do not
// split among 4 tensor ranks; tensor sizes that would: 1, 2, 5, 10".
#pragma once

#include <cstdint>
#include <string>

namespace distlab::tensor_parallel {

// size / parts; throws std::invalid_argument (the text above, `what` being
// "ColumnParallelLinear: 10 output features") when parts does not divide it.
int64_t split_evenly(const std::string& what, int64_t size, int parts);

// "1, 2, 5, 10": the group sizes that divide `size` (at most 12 listed).
std::string sizes_that_divide(int64_t size);

}  // namespace distlab::tensor_parallel
