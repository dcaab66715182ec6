// all_to_all and all_to_all_v: check the tensors, turn rows into elements,
// then the pairwise plan (run_exchange) or the backend's own.
#include <ATen/ATen.h>

#include <numeric>
#include <string>

#include "collectives/collectives.hpp"
#include "collectives/executor.hpp"
#include "collectives/tags.hpp"
#include "comm/flight_op.hpp"

namespace distlab::collectives {
namespace {

std::string who(const Communicator& comm, const char* call) {
  return "rank " + std::to_string(comm.world_rank()) + ": " + call + ": ";
}

std::string listed(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return "[" + text + "]";
}

// Elements in one row (dimension 0) of `t`, from its shape (a tensor of
// no rows still has rows of a size).
int64_t row_elements(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

void check_rows(const Communicator& comm, const char* call, const char* name, const at::Tensor& t,
                const std::vector<int64_t>& rows) {
  if (!t.defined()) throw comm::CommError(who(comm, call) + name + " is an undefined tensor");
  if (rows.size() != static_cast<size_t>(comm.size()))
    throw comm::CommError(who(comm, call) + name + " needs one row count per rank (" + std::to_string(comm.size()) +
                          "), got " + std::to_string(rows.size()));
  for (int64_t r : rows)
    if (r < 0) throw comm::CommError(who(comm, call) + name + " row counts " + listed(rows) + " hold a negative one");
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  const int64_t have = t.dim() == 0 ? 1 : t.size(0);
  if (have != total)
    throw comm::CommError(who(comm, call) + name + " has " + std::to_string(have) + " rows but its counts " +
                          listed(rows) + " add up to " + std::to_string(total));
}

// This rank's part of the plan: its own row of counts (what it sends) and
// column (what it receives), in elements. The other ranks' entries are not
// known here and stay 0, so the plan holds exactly this rank's transfers.
Plan my_plan(const Communicator& comm, const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
             int elem_bytes) {
  const int p = comm.size(), me = comm.rank();
  std::vector<int64_t> counts(static_cast<size_t>(p) * p, 0);
  for (int peer = 0; peer < p; ++peer) {
    counts[static_cast<size_t>(me) * p + peer] = send[peer];
    counts[static_cast<size_t>(peer) * p + me] = recv[peer];
  }
  return make_all_to_all_plan(counts, p, elem_bytes);
}

std::vector<int64_t> times(const std::vector<int64_t>& rows, int64_t per_row) {
  std::vector<int64_t> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] * per_row;
  return out;
}

}  // namespace

void all_to_all_v(Communicator& comm, const at::Tensor& input, at::Tensor& output,
                  const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows, Algorithm algorithm,
                  int tag) {
  check_rows(comm, "all_to_all", "input", input, send_rows);
  check_rows(comm, "all_to_all", "output", output, recv_rows);
  if (input.scalar_type() != output.scalar_type() || input.device() != output.device())
    throw comm::CommError(who(comm, "all_to_all") + "input and output differ in dtype or device");
  const int64_t per_row = row_elements(input);
  if (input.dim() != output.dim() || input.sizes().slice(std::min<size_t>(1, input.dim())) !=
                                         output.sizes().slice(std::min<size_t>(1, output.dim())))
    throw comm::CommError(who(comm, "all_to_all") + "input rows " + c10::str(input.sizes()) + " and output rows " +
                          c10::str(output.sizes()) + " differ past the first dimension");
  if (algorithm != Algorithm::kNative && algorithm != Algorithm::kPairwise)
    throw comm::CommError(who(comm, "all_to_all") + "no plan for algorithm '" + to_string(algorithm) +
                          "' (pairwise or native)");
  check_collective_tag(tag);
  const std::vector<int64_t> send = times(send_rows, per_row), recv = times(recv_rows, per_row);
  comm::FlightOp::collective(comm, "all_to_all", to_string(algorithm), input, -1).run([&] {
    const at::Tensor in = input.contiguous().view({-1});
    at::Tensor out = output.is_contiguous() ? output.view({-1}) : at::empty({output.numel()}, output.options());
    if (algorithm == Algorithm::kNative) {
      comm.native_all_to_all(in, out, send, recv);
    } else {
      const Plan plan = my_plan(comm, send, recv, static_cast<int>(input.element_size()));
      trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneComm, "collective", "collective");
      if (span.active()) {
        describe_call(span, comm, plan, in, in.numel());
        span.arg("steps", plan.steps.size());
      }
      run_exchange(comm, plan, in, out, tag);
    }
    if (!output.is_contiguous()) output.copy_(out.view(output.sizes()));
  });
}

void all_to_all(Communicator& comm, const at::Tensor& input, at::Tensor& output, Algorithm algorithm, int tag) {
  const int p = comm.size();
  const int64_t rows = input.defined() && input.dim() > 0 ? input.size(0) : 0;
  if (!input.defined() || input.dim() == 0 || rows % p != 0)
    throw comm::CommError(who(comm, "all_to_all") + "input needs a first dimension that splits into " +
                          std::to_string(p) + " equal blocks, got " +
                          (input.defined() ? std::to_string(rows) + " rows" : "an undefined tensor") +
                          " (all_to_all_v takes blocks of any size)");
  if (!output.defined() || output.sizes() != input.sizes())
    throw comm::CommError(who(comm, "all_to_all") + "output needs the input's shape");
  const std::vector<int64_t> each(static_cast<size_t>(p), rows / p);
  all_to_all_v(comm, input, output, each, each, algorithm, tag);
}

}  // namespace distlab::collectives
