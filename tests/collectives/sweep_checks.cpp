#include "sweep_checks.hpp"

#include <ATen/ScalarOps.h>

#include <numeric>
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

// DDP's all-reduce of a bucket's gradients where they lie
// (Communicator::native_all_reduce_parts) against its definition: the
// parts times the scale, in one buffer (at::mul_out, as the reducer
// multiplies into a bucket), native_all_reduce: bit for bit, on every rank.
// Parts of 0, 1 and odd counts, shares that start and end inside them,
// and over 4 MiB in all (the shared-memory transport's in-place path);
// then with rank 0 holding the same elements as one part. Returns how many
// of the all-reduces the backend said it ran in place.
int check_parts(Communicator& comm, Failures& failures, int salt) {
  const int p = comm.size(), me = comm.rank();
  const std::vector<int64_t> counts = {0, 1, 3, 100003, 17, 1100000, 5};
  int in_place = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kLong}) {
    ++salt;
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const at::Tensor input = input_for(me, total, dtype, salt);
    const double scale = dtype == at::kLong ? 1.0 : 1.0 / p;  // an integer times 1/p is no integer
    at::Tensor want = input.clone();
    if (scale != 1.0) at::mul_out(want, input, at::native::wrapped_scalar_tensor(scale));
    comm.native_all_reduce(want, ReduceOp::kSum);
    for (bool one_part_on_rank0 : {false, true}) {
      std::vector<at::Tensor> parts;
      int64_t offset = 0;
      for (int64_t n : (one_part_on_rank0 && me == 0) ? std::vector<int64_t>{total} : counts) {
        parts.push_back(input.narrow(0, offset, n).clone());
        offset += n;
      }
      in_place += comm.all_reduces_parts_in_place(static_cast<int64_t>(input.nbytes())) ? 1 : 0;
      comm.native_all_reduce_parts(parts, scale);
      at::Tensor got = at::cat(parts);
      const std::string what = std::string("all_reduce_parts ") + c10::toString(dtype) +
                               (one_part_on_rank0 ? " (rank 0: one part)" : "") + " p=" + std::to_string(p) +
                               " rank " + std::to_string(me);
      expect_close(failures, what, got, want, 0.0);
    }
  }
  return in_place;
}

}  // namespace

int sweep_rank(Communicator& comm, const Sweep& sweep, Failures& failures) {
  int salt = 0;
  for (at::ScalarType dtype : sweep.dtypes)
    for (int64_t count : sweep.counts) {
      const auto roots = roots_of(comm.size(), sweep.every_root);
      for (ReduceOp op : kOps) check_reductions(comm, failures, dtype, count, op, ++salt, roots);
      check_copies(comm, failures, dtype, count, ++salt, roots);
    }
  check_all_to_all(comm, {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kBFloat16, at::kByte}, failures);
  return check_parts(comm, failures, salt);
}

}  // namespace distlab::collectives::testing
