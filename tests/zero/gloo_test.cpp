// The ZeRO checks across gloo processes started by the built distlab-run:
// the world of 2 and 4, and in it groups of 1 and 3 (spot checks of every
// flavor; zero_test.cpp runs every case on thread ranks); sharded
// checkpoints written by 4 processes and resumed by 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "launcher_process.hpp"
#include "support/process_backend.hpp"

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

// DDP and every ZeRO stage over the same-host transport (--backend auto):
// the same checks against one process and DDP, on the world and a group.
TEST(ShmZero, EqualsOneProcessAndDdpOnWorldAndGroup) {
  distlab::testing::ScopedEnv backend("DISTLAB_TEST_BACKEND", "auto");
  auto f = distlab::launcher::testing::run_launcher(
      {"--nproc-per-node", "4", "--master-port", "0", "--timeout-ms", "60000", ZERO_GLOO_WORKER_PATH}, 180s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.err.find("4 rank(s) on this host talk through shared memory"), std::string::npos) << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(f.out.find("rank " + std::to_string(r) + " of 4 (zero rank "), std::string::npos) << f.out << f.err;
}

// Sharded checkpoints across processes: written by 4, resumed by 2, each
// ending where the uninterrupted 4-process run ended (checkpoint_checks.cpp).
TEST(GlooZeroCheckpoint, SavedByFourProcessesResumedByTwo) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("distlab_zero_gloo_ckpt_" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  auto launch = [&](int ranks, const std::string& mode) {
    return distlab::launcher::testing::run_launcher({"--nproc-per-node", std::to_string(ranks), "--master-port", "0",
                                                     "--timeout-ms", "60000", ZERO_GLOO_WORKER_PATH, "checkpoint",
                                                     mode, dir},
                                                    180s);
  };
  const auto saved = launch(4, "save");
  ASSERT_FALSE(saved.timed_out) << saved.out << saved.err;
  ASSERT_EQ(saved.exit_code, 0) << saved.out << saved.err;
  const auto resumed = launch(2, "resume");
  ASSERT_FALSE(resumed.timed_out) << resumed.out << resumed.err;
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_EQ(resumed.out.find("MISMATCH"), std::string::npos) << resumed.out;
  for (const char* stage : {"ZeRO-1 Adam", "ZeRO-2 SGD+momentum", "ZeRO-3 Adam"})
    for (int r = 0; r < 2; ++r) {
      const std::string line = "rank " + std::to_string(r) + " of 2: " + stage + ": resumed on rank " +
                               std::to_string(r) + " of 2, max difference ";
      EXPECT_NE(resumed.out.find(line), std::string::npos) << "missing: " << line << "\n" << resumed.out;
    }
  std::cout << resumed.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
