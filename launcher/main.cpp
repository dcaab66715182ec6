// distlab-run: starts the ranks of a DistLab job, torchrun-style.
//
//   distlab-run --nproc-per-node 4 ./build/lessons/06_ddp_from_scratch/06_ddp_from_scratch
//
// See README.md for the flags, the variables each worker gets, and how two
// launchers form one job across nodes.
#include <iostream>

#include "job.hpp"

int main(int argc, char** argv) {
  using namespace distlab::launcher;
  try {
    auto options =
        parse_launch_options(std::vector<std::string>(argv + 1, argv + argc), std::cout, distlab::comm::current_environment());
    if (!options) return kExitOk;  // --help
    return run_job(*options);
  } catch (const UsageError& e) {
    std::cerr << "distlab-run: " << e.what() << "\n";
    return kExitUsage;
  }
}
