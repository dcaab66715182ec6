// One rank of the collectives sweep over processes, started by distlab-run
// from gloo_test.cpp: the same checks as the thread ranks of
// collectives_test.cpp, on gloo (or, with DISTLAB_TEST_BACKEND=auto, the
// same-host transport) and its native collectives.
//
// With an argument, one case of gloo_test.cpp's instead:
//   misfit     a ring all-reduce that rank 2 calls with 13 elements and the
//              others with 10, whose pieces gloo would carry unchecked (rank
//              0 would receive a piece of 5 elements into 4) if the executor
//              did not check the call first;
//   no-copies  a ring all-reduce of 16 MiB (pieces of 4 MiB on 4 ranks) run
//              twice, the second under the allocator meter: what it allocates
//              beyond what the process held before it (a copy of each piece
//              sent, if the pieces were sent as checked messages).
#include <iostream>
#include <string>

#include "collectives/collectives.hpp"
#include "comm/job.hpp"
#include "memory/allocator_meter.hpp"
#include "sweep_checks.hpp"
#include "support/process_backend.hpp"

namespace {

void misfit(distlab::comm::Communicator& comm) {
  at::Tensor t = at::ones({comm.rank() == 2 ? 13 : 10});
  distlab::collectives::all_reduce(comm, t, distlab::comm::ReduceOp::kSum, distlab::collectives::Algorithm::kRing);
  std::cout << "rank " << comm.rank() << ": the all-reduce of a misfit returned" << std::endl;
}

void no_copies(distlab::comm::Communicator& comm, distlab::memory::AllocatorMeter& meter) {
  using distlab::collectives::Algorithm;
  const int64_t p = comm.size();
  at::Tensor t = at::ones({int64_t{1} << 22});
  distlab::collectives::all_reduce(comm, t, distlab::comm::ReduceOp::kSum, Algorithm::kRing);  // keeps its scratch
  const int64_t held = meter.allocated();
  meter.reset_peak();
  distlab::collectives::all_reduce(comm, t, distlab::comm::ReduceOp::kSum, Algorithm::kRing);
  const int64_t beyond = meter.peak() - held;
  const bool sums = at::equal(t, at::full({int64_t{1} << 22}, static_cast<double>(p * p)));
  std::cout << "rank " << comm.rank() << ": ring all-reduce of 16 MiB, sums " << (sums ? "right" : "WRONG") << ", "
            << beyond << " bytes allocated beyond what the process held" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace distlab;
  collectives::testing::Failures failures;
  comm::JobOptions job;
  job.backend = distlab::testing::process_backend();
  if (argc > 1) {
    const std::string scenario = argv[1];
    try {
      memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
      comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& comm) {
        if (scenario == "misfit") misfit(comm);
        if (scenario == "no-copies") no_copies(comm, meter);
      });
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << std::endl;
      return 1;
    }
    return 0;
  }
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& comm) {
      const int in_place = collectives::testing::sweep_rank(
          comm, {{at::kFloat, at::kDouble, at::kLong, at::kBFloat16}, {0, 1, 3, 100, 1000, 100003}, /*every_root=*/true}, failures);
      std::cout << "rank " << comm.rank() << " of " << comm.size() << ": "
                << (failures.count() == 0 ? "sweep passed" : failures.report()) << ", " << in_place
                << " all-reduces of parts in place" << std::endl;
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return failures.count() == 0 ? 0 : 1;
}
