// The executor across gloo processes (2 and 4, started by the built
// distlab-run): every schedule equal to the unsplit model.
#include <gtest/gtest.h>

#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;

class GlooPipeline : public testing::TestWithParam<int> {};

TEST_P(GlooPipeline, EveryScheduleEqualsTheUnsplitModel) {
  const int ranks = GetParam();
  auto f = distlab::launcher::testing::run_launcher(
      {"--nproc-per-node", std::to_string(ranks), "--master-port", "0", "--timeout-ms", "60000",
       PIPELINE_GLOO_WORKER_PATH},
      180s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  for (int r = 0; r < ranks; ++r) {
    const std::string line = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": pipeline equals the unsplit model";
    EXPECT_NE(f.out.find(line), std::string::npos) << "missing: " << line << "\n" << f.out << f.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Processes, GlooPipeline, testing::Values(2, 4));

}  // namespace
