// The ZeRO checks across gloo processes started by the built distlab-run:
// the world of 2 and 4, and in it groups of 1 and 3 (spot checks of every
// flavor; zero_test.cpp runs every case on thread ranks).
#include <gtest/gtest.h>

#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;

class GlooZero : public testing::TestWithParam<int> {};

TEST_P(GlooZero, EqualsOneProcessAndDdpOnWorldAndGroup) {
  const int ranks = GetParam();
  auto f = distlab::launcher::testing::run_launcher(
      {"--nproc-per-node", std::to_string(ranks), "--master-port", "0", "--timeout-ms", "60000", ZERO_GLOO_WORKER_PATH},
      180s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  for (int r = 0; r < ranks; ++r) {
    const std::string world = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + " (world rank ";
    const std::string group = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + " (zero rank ";
    EXPECT_NE(f.out.find(world), std::string::npos) << "missing: " << world << "\n" << f.out << f.err;
    EXPECT_NE(f.out.find(group), std::string::npos) << "missing: " << group << "\n" << f.out << f.err;
  }
  std::cout << f.out;
}

INSTANTIATE_TEST_SUITE_P(Processes, GlooZero, testing::Values(2, 4));

}  // namespace
