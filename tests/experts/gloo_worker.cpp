// One rank of the expert-parallel checks over gloo processes, started by
// distlab-run from gloo_test.cpp: the experts spread over the whole world,
// dropless and with a capacity, against every expert on every rank
// (expert_checks.hpp). One line per check and rank; "MISMATCH" when the
// difference is past the tolerance.
#include <iostream>

#include "comm/job.hpp"
#include "expert_checks.hpp"

int main() {
  using namespace distlab;
  namespace checks = experts::testing;
  comm::JobOptions job;
  job.backend = "gloo";
  bool ok = true;
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& world) {
      for (double capacity_factor : {0.0, 1.0}) {
        experts::MoeOptions o;
        o.experts = 2 * world.size(), o.top_k = 2, o.capacity_factor = capacity_factor;
        const double worst = checks::largest_difference_from_naive(world, o);
        const bool good = worst <= checks::kTolerance;
        ok = ok && good;
        std::cout << (good ? "" : "MISMATCH ") << "rank " << world.rank() << " of " << world.size() << ": "
                  << (capacity_factor > 0 ? "capacity" : "dropless")
                  << " expert parallel equals every expert on every rank, largest difference " << worst << std::endl;
      }
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
