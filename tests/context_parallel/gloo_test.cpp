// The context-parallel checks across gloo processes started by the built
// distlab-run (2 and 3 of them): the same checks ring_attention_test.cpp
// runs on thread ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <string>

#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;

class GlooContextParallel : public testing::TestWithParam<int> {};

TEST_P(GlooContextParallel, EveryMethodAndLayoutEqualsTheWholeSoftmaxAndItsGradients) {
  const int ranks = GetParam();
  auto f = distlab::launcher::testing::run_launcher({"--nproc-per-node", std::to_string(ranks), "--master-port", "0",
                                                     "--timeout-ms", "60000", CP_GLOO_WORKER_PATH},
                                                    120s);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
  for (int r = 0; r < ranks; ++r)
    for (const std::string layout : {"contiguous full", "contiguous causal", "zigzag full", "zigzag causal"}) {
      std::vector<std::string> lines;
      for (const std::string method : {"ring", "all-gather", "naive", "ulysses"})
        lines.push_back(method + " " + layout + " equals the whole softmax");
      for (const std::string method : {"ring", "all-gather", "naive", "ulysses"})
        lines.push_back(method + " " + layout + " gradients equal autograd's");
      for (const std::string& what : lines) {
        const std::string line = "rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": " + what;
        EXPECT_NE(f.out.find(line), std::string::npos) << "missing: " << line << "\n" << f.out << f.err;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Processes, GlooContextParallel, testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "_processes"; });

}  // namespace
