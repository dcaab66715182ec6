// One number from every rank, on every rank: each rank's own (a table),
// their sum, their largest, their mean. Counts (elements found wrong) are
// summed over ranks; times are the largest.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "collectives/collectives.hpp"
#include "comm/communicator.hpp"

namespace distlab::lessons {

// Element `rank` of a (p,) tensor is filled in, and the library's
// all-gather (lesson 05's ring, from point-to-point messages) fills in the
// others.
inline std::vector<double> one_per_rank(comm::Communicator& comm, double mine) {
  at::Tensor table = at::zeros({comm.size()}, at::kDouble);
  table[comm.rank()] = mine;
  table = table.to(comm.device());
  collectives::all_gather(comm, table);
  table = table.cpu();
  return std::vector<double>(table.data_ptr<double>(), table.data_ptr<double>() + comm.size());
}

inline int64_t sum_over_ranks(comm::Communicator& comm, int64_t mine) {
  at::Tensor total = at::full({1}, mine, at::kLong).to(comm.device());
  comm.native_all_reduce(total);
  return total.cpu().item<int64_t>();
}

inline double max_over_ranks(comm::Communicator& comm, double mine) {
  at::Tensor t = at::full({1}, mine, at::kDouble).to(comm.device());
  comm.native_all_reduce(t, comm::ReduceOp::kMax);
  return t.cpu().item<double>();
}

// The sum of one number over ranks divided by their count.
inline double mean_over_ranks(comm::Communicator& comm, double mine) {
  at::Tensor t = at::full({1}, mine, at::kDouble).to(comm.device());
  comm.native_all_reduce(t, comm::ReduceOp::kSum);
  return t.cpu().item<double>() / comm.size();
}

}  // namespace distlab::lessons
