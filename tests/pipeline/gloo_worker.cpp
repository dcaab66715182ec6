// One rank of exec_checks over gloo processes, started by distlab-run from
// gloo_test.cpp.
#include <iostream>

#include "comm/job.hpp"
#include "exec_checks.hpp"

int main() {
  using namespace distlab;
  comm::JobOptions job;
  job.backend = "gloo";
  bool ok = true;
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& comm) {
      const auto failures = pipeline::testing::check_against_unsplit(comm);
      for (const auto& f : failures) std::cout << "MISMATCH " << f << std::endl;
      ok = failures.empty();
      std::cout << "rank " << comm.rank() << " of " << comm.size() << ": "
                << (ok ? "pipeline equals the unsplit model" : "pipeline differs") << std::endl;
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
