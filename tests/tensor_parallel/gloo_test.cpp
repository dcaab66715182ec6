// The tensor-parallel checks across gloo processes started by the built
// distlab-run (2 and 4 of them, the world as the tensor group): the same
// checks linear_test.cpp runs on thread ranks.
#include <gtest/gtest.h>

#include <string>

#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;

class GlooTensorParallel : public testing::TestWithParam<int> {};

TEST_P(GlooTensorParallel, EveryCheckEqualsTheUnsplitModule) {
  const int ranks = GetParam();
  auto f = distlab::launcher::testing::run_launcher({"--nproc-per-node", std::to_string(ranks), "--master-port", "0",
                                                     "--timeout-ms", "60000", TP_GLOO_WORKER_PATH},
                                                    180s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  for (int r = 0; r < ranks; ++r)
    for (const std::string check :
         {"mlp", "mlp_sp", "encoder", "encoder_sp", "encoder_round_trip", "decoder", "decoder_sp", "decoder_round_trip",
          "encoder_load", "decoder_load",
          "embedding", "embedding_sp", "embedding_v10", "embedding_v10_sp", "cross_entropy", "cross_entropy_v10",
          "cross_entropy_all_ignored"}) {
      const std::string line = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + " (tensor rank " +
                               std::to_string(r) + "): " + check + " equals";
      EXPECT_NE(f.out.find(line), std::string::npos) << "missing: " << line << "\n" << f.out << f.err;
    }
  std::cout << f.out;
}

INSTANTIATE_TEST_SUITE_P(Processes, GlooTensorParallel, testing::Values(2, 4));

}  // namespace
