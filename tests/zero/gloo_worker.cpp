// One rank of the ZeRO checks over gloo processes, started by distlab-run
// from gloo_test.cpp: on the whole world, then on a group of all ranks but
// 0 (rank 0 alone forms the other). Spot checks: thread ranks run every case.
#include <iostream>

#include "comm/job.hpp"
#include "zero_checks.hpp"

int main() {
  using namespace distlab;
  comm::JobOptions job;
  job.backend = "gloo";
  bool ok = true;
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& world) {
      auto group = world.split(/*color=*/world.rank() == 0 ? 1 : 0, /*key=*/world.rank(), "zero");
      for (comm::Communicator* on : {&world, group.get()}) {
        const auto report = zero::testing::check_against_references(*on, zero::testing::Coverage::kSpotChecks);
        for (const auto& f : report.failures) std::cout << "MISMATCH " << f << std::endl;
        ok = ok && report.failures.empty() && report.runs > 0;
        std::cout << "rank " << world.rank() << " of " << world.size() << " (" << on->group() << " rank "
                  << on->rank() << " of " << on->size() << "): " << report.runs
                  << " ZeRO runs equal one process and DDP, max difference " << report.worst_vs_single << " / "
                  << report.worst_vs_ddp << std::endl;
      }
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
