// One rank of the ZeRO checks over gloo processes (or the same-host
// transport, DISTLAB_TEST_BACKEND=auto), started by distlab-run
// from gloo_test.cpp: on the whole world, then on a group of all ranks but
// 0 (rank 0 alone forms the other). Spot checks: thread ranks run every case.
//
//   zero_gloo_worker                      the checks against one process and DDP
//   zero_gloo_worker checkpoint save DIR  sharded checkpoints written by these ranks,
//   zero_gloo_worker checkpoint resume DIR  and resumed by another number of them
#include <iostream>
#include <string>

#include "checkpoint_checks.hpp"
#include "comm/job.hpp"
#include "support/process_backend.hpp"
#include "zero_checks.hpp"

int main(int argc, char** argv) {
  using namespace distlab;
  comm::JobOptions job;
  job.backend = distlab::testing::process_backend();  // gloo, or auto (DISTLAB_TEST_BACKEND)
  bool ok = true;
  if (argc == 4 && std::string(argv[1]) == "checkpoint") {
    try {
      comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& world) {
        for (const std::string& line : zero::testing::save_or_resume(world, argv[2], argv[3])) {
          std::cout << "rank " << world.rank() << " of " << world.size() << ": " << line << std::endl;
          ok = ok && line.rfind("MISMATCH", 0) != 0;
        }
      });
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << std::endl;
      return 1;
    }
    return ok ? 0 : 1;
  }
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
