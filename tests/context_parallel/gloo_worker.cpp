// One rank of the context-parallel checks over gloo processes, started by
// distlab-run from gloo_test.cpp: every layout, causal and not, by every
// method (context_checks.hpp), on the whole world. One line per check and
// rank; "MISMATCH" when the difference is past the tolerance.
#include <iostream>
#include <string>

#include "comm/job.hpp"
#include "context_checks.hpp"

int main() {
  using namespace distlab;
  using context_parallel::Layout;
  namespace checks = context_parallel::testing;
  comm::JobOptions job;
  job.backend = "gloo";
  bool ok = true;
  try {
    comm::run_job(comm::with_env_defaults(job), [&](comm::Communicator& world) {
      for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
        for (bool causal : {false, true})
          for (context_parallel::Method method : context_parallel::all_methods()) {
            const double worst = checks::largest_difference_from_whole(world, layout, causal, method);
            const bool good = worst <= checks::kTolerance;
            ok = ok && good;
            std::cout << (good ? "" : "MISMATCH ") << "rank " << world.rank() << " of " << world.size() << ": "
                      << context_parallel::to_string(method) << " " << context_parallel::to_string(layout) << (causal ? " causal" : " full")
                      << " equals the whole softmax, largest difference " << worst << std::endl;
          }
      // The gradients: the ring's own backward, autograd through the gathers and Ulysses.
      for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
        for (bool causal : {false, true})
          for (context_parallel::Method method : context_parallel::all_methods()) {
            const double worst = checks::largest_gradient_difference(world, layout, causal, method);
            const bool good = worst <= checks::kGradientTolerance;
            ok = ok && good;
            std::cout << (good ? "" : "MISMATCH ") << "rank " << world.rank() << " of " << world.size() << ": "
                      << context_parallel::to_string(method) << " " << context_parallel::to_string(layout)
                      << (causal ? " causal" : " full") << " gradients equal autograd's, largest difference " << worst
                      << std::endl;
          }
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return ok ? 0 : 1;
}
