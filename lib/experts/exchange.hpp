// The exchanges of expert parallelism, as autograd functions: rows sent to
// the ranks that hold their experts, and back.
//
// exchange_rows is all-to-all-v (collectives.hpp): send_rows[d] rows to
// rank d, recv_rows[s] from rank s. Its backward is the same exchange with
// the counts swapped: each row's gradient goes back to where the row came
// from.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::experts {

at::Tensor exchange_rows(comm::Communicator& comm, const at::Tensor& rows, const std::vector<int64_t>& send_rows,
                         const std::vector<int64_t>& recv_rows, int tag = 0);

// Each rank's counts (p, n) int64 (row d: what it sends rank d, per one of
// n kinds) -> (p, n): row s what rank s sends here. An all-to-all of the
// counts, before the rows themselves (nanotron and Megatron do the same).
at::Tensor exchange_counts(comm::Communicator& comm, const at::Tensor& counts, int tag = 0);

}  // namespace distlab::experts
