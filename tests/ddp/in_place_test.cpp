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

  // The path taken, not only planned: per synchronized step the transport
  // did in place as many all-reduces of parts as the plan put buckets there
  // (at least one), the buffered run none; DDP allocated its buffers' bytes
  // (the meter, within 4 KiB of LibTorch's own), so the in-place run spared
  // the bytes of its in-place buckets.
  const std::regex steps(R"(  in place per step: planned ([\d ]+), done ([\d ]+); buffered run done ([\d ]+); )"
                         R"(DDP allocated (\d+) bytes \(buffers (\d+)\) against (\d+) \(buffers (\d+)\))");
  lines = 0;
  for (auto it = std::sregex_iterator(f.out.begin(), f.out.end(), steps); it != std::sregex_iterator(); ++it) {
    ++lines;
    const auto& m = *it;
    EXPECT_EQ(m[1].str(), m[2].str()) << m.str();
    EXPECT_EQ(m[1].str().find('0'), std::string::npos) << m.str();  // every step put some in place
    EXPECT_EQ(m[3].str(), "0 0 0 0") << m.str();
    const long long in_place = std::stoll(m[4]), in_place_buffers = std::stoll(m[5]);
    const long long buffered = std::stoll(m[6]), buffered_buffers = std::stoll(m[7]);
    EXPECT_NEAR(in_place, in_place_buffers, 4096) << m.str();
    EXPECT_NEAR(buffered, buffered_buffers, 4096) << m.str();
    EXPECT_GT(buffered_buffers - in_place_buffers, 64 << 10) << m.str();  // one-copy buckets, 64 KiB or more
  }
  EXPECT_EQ(lines, 2 * ranks) << f.out;

  // One all-reduce of parts alone, 786,432 floats in 3 parts: rank r reduces
  // its share [n r / p, n (r + 1) / p) reading the p - 1 others' values of it,
  // then reads every other share once, and the p - 1 others' tables of 3
  // (address, bytes) pairs: one copy of every byte it does not reduce itself,
  // no buffer (a buffered all-reduce allocates the 3 MiB; this one at most
  // two scratch pieces of 256 KiB), and the sums exact.
  const std::regex alone(R"(rank (\d+) of \d+: parts of (\d+) bytes \(3 parts\): (\d+) in place, (\d+) bytes read )"
                         R"(from the other ranks, (\d+) bytes allocated at most, sums (\w+))");
  lines = 0;
  const long long n = 300000 + 250000 + 236432, p = ranks;
  for (auto it = std::sregex_iterator(f.out.begin(), f.out.end(), alone); it != std::sregex_iterator(); ++it) {
    ++lines;
    const auto& m = *it;
    const long long r = std::stoll(m[1]), share = n * (r + 1) / p - n * r / p;
    EXPECT_EQ(std::stoll(m[2]), 4 * n) << m.str();
    EXPECT_EQ(m[3].str(), "1") << m.str();
    EXPECT_EQ(std::stoll(m[4]), 4 * ((p - 1) * share + (n - share)) + (p - 1) * 3 * 16) << m.str();
    EXPECT_LE(std::stoll(m[5]), 2 * (256 << 10) + 1024) << m.str();
    EXPECT_EQ(m[6].str(), "exact") << m.str();
  }
  EXPECT_EQ(lines, ranks) << f.out;
}

INSTANTIATE_TEST_SUITE_P(Processes, DdpInPlace, testing::Values(2, 3));

}  // namespace
