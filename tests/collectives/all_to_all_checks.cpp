#include "all_to_all_checks.hpp"

#include <sstream>

#include "collectives/collectives.hpp"

namespace distlab::collectives::testing {
namespace {

// The block `src` sends `dst`: rows x width values any rank can recompute.
at::Tensor block_for(int src, int dst, int64_t rows, int64_t width, at::ScalarType dtype, int salt) {
  const at::ScalarType made = dtype == at::kInt || dtype == at::kByte ? at::kLong : dtype;
  at::Tensor values = input_for(src * 31 + dst, rows * width, made, salt);
  if (dtype == at::kByte) values = values.add(10);  // [0, 20]
  return values.to(dtype).view({rows, width});
}

std::string label(const comm::Communicator& comm, at::ScalarType dtype, const char* what, Algorithm algorithm,
                  const std::string& extra) {
  std::ostringstream out;
  out << "p=" << comm.size() << " rank " << comm.rank() << " [" << comm.group() << "] " << c10::toString(dtype) << " "
      << what << "/" << to_string(algorithm) << " " << extra;
  return out.str();
}

// One exchange of rows(src, dst) rows of `width` values, both algorithms.
template <typename Rows>
void check_exchange(comm::Communicator& comm, Failures& failures, at::ScalarType dtype, int64_t width, int salt,
                    Rows rows, bool equal_blocks) {
  const int p = comm.size(), me = comm.rank();
  std::vector<int64_t> send(p), recv(p);
  std::vector<at::Tensor> out_blocks, in_blocks;
  for (int peer = 0; peer < p; ++peer) {
    send[peer] = rows(me, peer);
    recv[peer] = rows(peer, me);
    out_blocks.push_back(block_for(me, peer, send[peer], width, dtype, salt));
    in_blocks.push_back(block_for(peer, me, recv[peer], width, dtype, salt));
  }
  const at::Tensor input = at::cat(out_blocks), expected = at::cat(in_blocks);
  const at::Tensor before = input.clone();
  for (Algorithm algorithm : {Algorithm::kPairwise, Algorithm::kNative}) {
    at::Tensor output = at::full(expected.sizes(), 7, expected.options());  // garbage to overwrite
    const std::string what = "width " + std::to_string(width) + " case " + std::to_string(salt);
    if (equal_blocks)
      all_to_all(comm, input, output, algorithm);
    else
      all_to_all_v(comm, input, output, send, recv, algorithm);
    expect_close(failures, label(comm, dtype, equal_blocks ? "all_to_all" : "all_to_all_v", algorithm, what), output,
                 expected, 0.0);
    expect_close(failures, label(comm, dtype, "input left alone", algorithm, what), input, before, 0.0);
  }
}

void check_on(comm::Communicator& comm, const std::vector<at::ScalarType>& dtypes, Failures& failures) {
  for (at::ScalarType dtype : dtypes) {
    for (int salt = 0; salt < 3; ++salt)
      check_exchange(comm, failures, dtype, /*width=*/3, salt,
                     [&](int src, int dst) { return rows_between(src, dst, salt); }, false);
    for (int64_t each : {0, 1, 5})
      check_exchange(comm, failures, dtype, /*width=*/1, 0, [&](int, int) { return each; }, true);
  }
}

}  // namespace

int64_t rows_between(int src, int dst, int salt) { return (src * 7 + dst * 3 + salt) % 5; }

void check_all_to_all(comm::Communicator& comm, const std::vector<at::ScalarType>& dtypes, Failures& failures) {
  check_on(comm, dtypes, failures);
  // On a group: the odd ranks and the even ones, each its own exchange.
  if (comm.size() < 3) return;
  auto group = comm.split(comm.rank() % 2, comm.rank(), comm.rank() % 2 == 0 ? "even" : "odd");
  check_on(*group, {dtypes.front()}, failures);
}

}  // namespace distlab::collectives::testing
