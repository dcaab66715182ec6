// DDP's buckets all-reduced where their gradients lie, over the same-host
// transport, against the same buckets through their buffers
// (in_place_worker.cpp): on 2 processes, and on 3 (where a rank past 1
// reduces its share through a scratch piece). One copy from 64 KiB on,
// so that the small model has buckets of both kinds.
#include <gtest/gtest.h>

#include <regex>

#include "launcher_process.hpp"
#include "support/process_backend.hpp"

namespace {

using namespace std::chrono_literals;

class DdpInPlace : public testing::TestWithParam<int> {};

TEST_P(DdpInPlace, GradientsAndParametersEqualTheBufferedBucketsBitForBit) {
  const int ranks = GetParam();
  distlab::testing::ScopedEnv backend("DISTLAB_TEST_BACKEND", "auto");
  distlab::testing::ScopedEnv one_copy("DISTLAB_SHM_SINGLE_COPY", "1");
  auto f = distlab::launcher::testing::run_launcher({"--nproc-per-node", std::to_string(ranks), "--master-port", "0",
                                                     "--timeout-ms", "60000", DDP_IN_PLACE_WORKER_PATH},
                                                    120s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.err.find("talk through shared memory (one copy"), std::string::npos) << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  const std::regex line(R"(rank (\d+) of (\d+)( \(find_unused_parameters\))?: (\d+) of (\d+) buckets in place, )"
                        R"(largest difference from the buffered run 0\n)");
  int lines = 0;
  for (auto it = std::sregex_iterator(f.out.begin(), f.out.end(), line); it != std::sregex_iterator(); ++it) {
    ++lines;
    const int in_place = std::stoi((*it)[4]), buckets = std::stoi((*it)[5]);
    EXPECT_GT(in_place, 0) << it->str();        // some went in place
    EXPECT_LT(in_place, buckets) << it->str();  // and some, too small, through their buffers
  }
  EXPECT_EQ(lines, 2 * ranks) << f.out << f.err;
}

INSTANTIATE_TEST_SUITE_P(Processes, DdpInPlace, testing::Values(2, 3));

}  // namespace
