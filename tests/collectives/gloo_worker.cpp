// One rank of the collectives sweep over processes, started by distlab-run
// from gloo_test.cpp: the same checks as the thread ranks of
// collectives_test.cpp, on gloo (or, with DISTLAB_TEST_BACKEND=auto, the
// same-host transport) and its native collectives.
#include <iostream>

#include "comm/job.hpp"
#include "sweep_checks.hpp"
#include "support/process_backend.hpp"

int main() {
  using namespace distlab;
  collectives::testing::Failures failures;
  comm::JobOptions job;
  job.backend = distlab::testing::process_backend();
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
