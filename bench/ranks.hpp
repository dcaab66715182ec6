// What the benchmarks that compare ranks share: a value from every rank, and
// the bytes a rank sent, read from the trace.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {

// Every rank's value, on every rank.
inline std::vector<double> gathered(comm::Communicator& world, double mine) {
  at::Tensor all = at::zeros({world.size()}, at::kDouble);
  all[world.rank()] = mine;
  world.native_all_reduce(all, comm::ReduceOp::kSum);
  return {all.data_ptr<double>(), all.data_ptr<double>() + world.size()};
}

// The bytes of every message `rank` sent in [from, to] (one "send" event each).
inline int64_t messages_sent(const trace::MemorySink& events, int rank, int64_t from, int64_t to) {
  int64_t bytes = 0;
  for (const trace::Event& e : events.events())
    if (e.rank == rank && e.category == "send" && e.begin_us >= from && e.end_us <= to) bytes += e.bytes;
  return bytes;
}

}  // namespace distlab::bench
