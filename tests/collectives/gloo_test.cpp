// The collectives across processes started by the built distlab-run:
// every algorithm against gloo's own collectives (3 and 4 processes) and
// against the shared arena's (2 and 4, --backend auto) and those in one
// copy (3).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher_process.hpp"
#include "support/process_backend.hpp"

namespace {

using namespace std::chrono_literals;

// The collectives' worker on `ranks` processes of distlab-run, each rank
// waiting `timeout_ms` for a peer; `scenario`: the worker's scenario, if not the sweep.
auto run_workers(int ranks, int timeout_ms, const std::string& scenario = "") {
  std::vector<std::string> args{"--nproc-per-node", std::to_string(ranks), "--master-port", "0", "--timeout-ms",
                                std::to_string(timeout_ms), COLLECTIVES_GLOO_WORKER_PATH};
  if (!scenario.empty()) args.push_back(scenario);
  return distlab::launcher::testing::run_launcher(args, 240s);
}

// The sweep on `ranks` processes of `backend`: every rank must pass it,
// having run `in_place` of its 8 all-reduces of parts (sweep_checks.cpp)
// in place: none over gloo; over shared memory those of 4 MiB or more
// (float, double, long: 6), or all 8 where one copy starts at 64 KiB.
void expect_sweep_passed(int ranks, const std::string& backend, int in_place) {
  distlab::testing::ScopedEnv chosen("DISTLAB_TEST_BACKEND", backend);
  auto f = run_workers(ranks, 60000);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  if (backend == "auto") EXPECT_NE(f.err.find("talk through shared memory"), std::string::npos) << f.err;
  for (int r = 0; r < ranks; ++r) {
    const std::string line = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": sweep passed, " +
                             std::to_string(in_place) + " all-reduces of parts in place";
    EXPECT_NE(f.out.find(line), std::string::npos) << "missing: " << line << "\n" << f.out << f.err;
  }
}

// Gloo carries a plan's pieces unchecked, the call checked once instead
// (collectives/executor.cpp): ranks that call one all-reduce with different
// counts are refused naming the rank and both calls, where gloo alone would
// end the process on an assertion in its network thread ("enforce fail")
// for a piece longer than its recv, and fill part of the recv for a shorter
// one.
TEST(GlooCollectives, ACallThatDoesNotFitIsRefusedNamingTheRankAndBothCalls) {
  auto f = run_workers(3, 20000, "misfit");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0) << f.out << f.err;
  const std::string all = f.out + f.err;
  EXPECT_EQ(all.find("returned"), std::string::npos) << all;
  EXPECT_EQ(all.find("enforce fail"), std::string::npos) << all;
  // Rank 0 receives from rank 2 and rank 2 from rank 1: whichever refuses first ends the job.
  const std::string hint = " (every rank must call the same collective with the same element count and dtype)";
  const std::string by_rank_0 = "[rank 0] error: all_reduce (ring, 10 Float elements) step 0 of 4 (reduce-scatter) "
                                "failed. rank 0: all_reduce ring of 10 Float elements on 3 ranks: rank 2 called "
                                "all_reduce ring of 13 Float elements on 3 ranks" + hint;
  const std::string by_rank_2 = "[rank 2] error: all_reduce (ring, 13 Float elements) step 0 of 4 (reduce-scatter) "
                                "failed. rank 2: all_reduce ring of 13 Float elements on 3 ranks: rank 1 called "
                                "all_reduce ring of 10 Float elements on 3 ranks" + hint;
  EXPECT_TRUE(all.find(by_rank_0) != std::string::npos || all.find(by_rank_2) != std::string::npos) << all;
}

// The pieces go as gloo's own messages, not as checked ones, which copy
// what they send into fresh memory (comm/gloo_p2p.hpp): the cost that took
// a third to three quarters of the ring's bandwidth (docs/benchmarks.md). A
// ring all-reduce of 16 MiB on 4 processes sends 6 pieces of 4 MiB from each
// rank; once its scratch is kept, it allocates no copy of one of them.
TEST(GlooCollectives, TheRingSendsItsPiecesWithoutACopy) {
  auto f = run_workers(4, 60000, "no-copies");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  const int64_t piece = (int64_t{1} << 22) / 4 * 4;  // bytes of one rank's chunk of 2^22 floats
  for (int r = 0; r < 4; ++r) {
    const std::string prefix = "rank " + std::to_string(r) + ": ring all-reduce of 16 MiB, sums right, ";
    const auto at = f.out.find(prefix);
    ASSERT_NE(at, std::string::npos) << f.out << f.err;
    const int64_t beyond = std::stoll(f.out.substr(at + prefix.size()));
    EXPECT_LT(beyond, piece / 4) << "rank " << r << " allocated " << beyond << " bytes: a copy of its pieces?\n"
                                 << f.out;
  }
}

class GlooSweep : public testing::TestWithParam<int> {};

TEST_P(GlooSweep, EveryAlgorithmAgreesWithGloo) { expect_sweep_passed(GetParam(), "gloo", 0); }

INSTANTIATE_TEST_SUITE_P(Processes, GlooSweep, testing::Values(3, 4));

// The same sweep over the same-host transport: point-to-point through the
// rings, the native collectives in the shared arena, groups with rings of
// their own.
class ShmSweep : public testing::TestWithParam<int> {};

TEST_P(ShmSweep, EveryAlgorithmAgreesWithTheSharedArena) { expect_sweep_passed(GetParam(), "auto", 6); }

INSTANTIATE_TEST_SUITE_P(Processes, ShmSweep, testing::Values(2, 4));

// Every collective from 64 KiB on in one copy (comm/shm_direct.cpp): the
// sweep's 100003 elements read straight out of the other processes, on 2
// ranks (the default's groups) and on 3, so that a rank past 1 reduces its
// share through a scratch piece.
class ShmSweepInOneCopy : public testing::TestWithParam<int> {};

TEST_P(ShmSweepInOneCopy, EveryAlgorithmAgreesWithTheCollectivesInOneCopy) {
  distlab::testing::ScopedEnv one_copy("DISTLAB_SHM_SINGLE_COPY", "1");
  distlab::testing::ScopedEnv any_group("DISTLAB_SHM_DIRECT_RANKS", "3");  // 2 by default
  expect_sweep_passed(GetParam(), "auto", 8);
}

INSTANTIATE_TEST_SUITE_P(Processes, ShmSweepInOneCopy, testing::Values(2, 3));

}  // namespace
