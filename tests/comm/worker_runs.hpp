// Jobs of comm_gloo_worker under the built distlab-run, for gloo_test.cpp
// and shm_test.cpp: the same worker over gloo's TCP or shared memory.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "launcher_process.hpp"

namespace distlab::comm::testing {

using launcher::testing::Finished;

// `ranks` processes run `scenario` (`jobs` times in the same processes) on
// `backend`: gloo, or auto (shared memory between them); `more`: the
// worker's other flags.
inline Finished run_worker(int ranks, const std::string& scenario, const std::string& timeout_ms = "60000",
                           int jobs = 1, const std::string& backend = "gloo",
                           const std::vector<std::string>& more = {}) {
  using namespace std::chrono_literals;
  std::vector<std::string> args{"--nproc-per-node", std::to_string(ranks), "--master-port", "0", "--timeout-ms",
                                timeout_ms, "--grace-ms", "1000", GLOO_WORKER_PATH, "--backend", backend,
                                "--scenario", scenario, "--jobs", std::to_string(jobs)};
  args.insert(args.end(), more.begin(), more.end());
  return launcher::testing::run_launcher(args, 120s);
}

// Every rank printed that all its checks passed, and none a MISMATCH.
inline void expect_every_rank_passed(const Finished& f, int ranks) {
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  for (int r = 0; r < ranks; ++r) {
    const std::string line = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + " of " +
                             std::to_string(ranks) + ": all checks passed";
    EXPECT_NE(f.out.find(line), std::string::npos) << "missing: " << line << "\n" << f.out << f.err;
  }
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
}

}  // namespace distlab::comm::testing
