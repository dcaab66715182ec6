#include "sweep_checks.hpp"

#include <sstream>

#include "all_to_all_checks.hpp"
#include "collectives/collectives.hpp"

namespace distlab::collectives::testing {
namespace {

const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

std::vector<int> roots_of(int p, bool every_root) {
  if (every_root || p <= 3) {
    std::vector<int> all(p);
    for (int r = 0; r < p; ++r) all[r] = r;
    return all;
  }
  return {0, p / 2, p - 1};
}

std::string label(const Communicator& comm, at::ScalarType dtype, int64_t count, const char* what, Algorithm algorithm,
                  const std::string& extra) {
  std::ostringstream out;
  out << "p=" << comm.size() << " rank " << comm.rank() << " " << c10::toString(dtype) << " count " << count << " "
      << what << "/" << to_string(algorithm) << " " << extra;
  return out.str();
}

// The reductions of one input against the native ones. The all-reduce
// results must also be bit for bit the same on every rank.
void check_reductions(Communicator& comm, Failures& failures, at::ScalarType dtype, int64_t count, ReduceOp op,
                      int salt, const std::vector<int>& roots) {
  const int p = comm.size(), me = comm.rank();
  const double tol = tolerance(dtype, p, op);
  const at::Tensor input = input_for(me, count, dtype, salt);
  const std::string how = comm::to_string(op);

  at::Tensor native_all = input.clone();
  comm.native_all_reduce(native_all, op);
  for (Algorithm algorithm : algorithms_for(Collective::kAllReduce)) {
    at::Tensor got = input.clone();
    all_reduce(comm, got, op, algorithm);
    expect_close(failures, label(comm, dtype, count, "all_reduce", algorithm, how), got, native_all, tol);
    at::Tensor rank0 = got.clone();
    comm.native_broadcast(rank0, 0);
    expect_close(failures, label(comm, dtype, count, "all_reduce", algorithm, how + " same on every rank"), got, rank0,
                 0.0);
  }

  const Range mine = chunk_range(count, p, me);
  at::Tensor scattered = input.clone();
  const at::Tensor chunk = reduce_scatter(comm, scattered, op);
  expect_close(failures, label(comm, dtype, count, "reduce_scatter", Algorithm::kRing, how), chunk,
               native_all.narrow(0, mine.offset, mine.count), tol);

  for (int root : roots) {
    at::Tensor native = input.clone();
    comm.native_reduce(native, root, op);
    for (Algorithm algorithm : algorithms_for(Collective::kReduce)) {
      at::Tensor got = input.clone();
      reduce(comm, got, root, op, algorithm);
      if (me == root)
        expect_close(failures, label(comm, dtype, count, "reduce", algorithm, how + " root " + std::to_string(root)),
                     got, native, tol);
    }
  }
}

// Broadcast against the native one, and all-gather against the inputs
// every rank can recompute: pure copies, so exact.
void check_copies(Communicator& comm, Failures& failures, at::ScalarType dtype, int64_t count, int salt,
                  const std::vector<int>& roots) {
  const int p = comm.size(), me = comm.rank();
  const at::Tensor input = input_for(me, count, dtype, salt);
  for (int root : roots) {
    at::Tensor native = input.clone();
    comm.native_broadcast(native, root);
    for (Algorithm algorithm : algorithms_for(Collective::kBroadcast)) {
      at::Tensor got = input.clone();
      broadcast(comm, got, root, algorithm);
      expect_close(failures, label(comm, dtype, count, "broadcast", algorithm, "root " + std::to_string(root)), got,
                   native, 0.0);
    }
  }

  at::Tensor expected = at::empty({count}, input.options());
  for (int r = 0; r < p; ++r) {
    const Range chunk = chunk_range(count, p, r);
    expected.narrow(0, chunk.offset, chunk.count)
        .copy_(input_for(r, count, dtype, salt).narrow(0, chunk.offset, chunk.count));
  }
  at::Tensor gathered = at::full({count}, 77, input.options());  // garbage outside this rank's chunk
  const Range mine = chunk_range(count, p, me);
  gathered.narrow(0, mine.offset, mine.count).copy_(input.narrow(0, mine.offset, mine.count));
  all_gather(comm, gathered);
  expect_close(failures, label(comm, dtype, count, "all_gather", Algorithm::kRing, ""), gathered, expected, 0.0);
}

}  // namespace

void sweep_rank(Communicator& comm, const Sweep& sweep, Failures& failures) {
  int salt = 0;
  for (at::ScalarType dtype : sweep.dtypes)
    for (int64_t count : sweep.counts) {
      const auto roots = roots_of(comm.size(), sweep.every_root);
      for (ReduceOp op : kOps) check_reductions(comm, failures, dtype, count, op, ++salt, roots);
      check_copies(comm, failures, dtype, count, ++salt, roots);
    }
  check_all_to_all(comm, {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kBFloat16, at::kByte}, failures);
}

}  // namespace distlab::collectives::testing
