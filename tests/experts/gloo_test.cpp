// The expert-parallel checks across gloo processes started by the built
// distlab-run (2 and 4 of them): the checks experts_test.cpp runs on thread
// ranks, the exchanges over gloo's all-to-all-v.
#include <gtest/gtest.h>

#include <string>

#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;

class GlooExpertParallel : public testing::TestWithParam<int> {};

TEST_P(GlooExpertParallel, EqualsEveryExpertOnEveryRank) {
  const int ranks = GetParam();
  auto f = distlab::launcher::testing::run_launcher({"--nproc-per-node", std::to_string(ranks), "--master-port", "0",
                                                     "--timeout-ms", "60000", EXPERTS_GLOO_WORKER_PATH},
                                                    120s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  for (int r = 0; r < ranks; ++r)
    for (const std::string what : {"dropless", "capacity"}) {
      const std::string line = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": " + what +
                               " expert parallel equals every expert on every rank";
      EXPECT_NE(f.out.find(line), std::string::npos) << "missing: " << line << "\n" << f.out << f.err;
    }
}

INSTANTIATE_TEST_SUITE_P(Processes, GlooExpertParallel, testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_processes"; });

}  // namespace
