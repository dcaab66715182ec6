// One rank of the tensor-parallel checks over gloo processes, started by
// distlab-run from gloo_test.cpp: every check (checks.hpp) the world's size
// accepts, on the whole world as the tensor group. Prints one line per
// check and rank; "MISMATCH" when a difference is past its tolerance.
#include <iostream>
#include <string>

#include "checks.hpp"
#include "comm/job.hpp"

int main() {
  using namespace distlab;
  comm::JobOptions job;
  job.backend = "gloo";
  bool ok = true;
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& world) {
      auto group = world.split(/*color=*/0, /*key=*/world.rank(), "tensor");
      int run = 0;
      for (const tensor_parallel::testing::Check& check : tensor_parallel::testing::all_checks()) {
        if (!check.accepts(group->size())) continue;
        const double worst = check.run(*group);
        ++run;
        const bool good = worst < check.tolerance;
        ok = ok && good;
        std::cout << (good ? "" : "MISMATCH ") << "rank " << world.rank() << " of " << world.size() << " ("
                  << group->group() << " rank " << group->rank() << "): " << check.name
                  << " equals the unsplit module, largest difference " << worst << std::endl;
      }
      ok = ok && run > 0;
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
