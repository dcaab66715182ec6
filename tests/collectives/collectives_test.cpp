// Every algorithm against the threads backend's native collective: world
// sizes {1,2,3,4,5,7,8}, counts {0,1,3,100,1000,100003}, sum, avg and max,
// in float32 with every root, in float64, bfloat16, float16 and int64 with
// roots 0, p/2 and p-1 (the whole sweep takes ~15 s on 2 cores).
#include "collectives/collectives.hpp"

#include <gtest/gtest.h>

#include "comm/threads_backend.hpp"
#include "sweep_checks.hpp"

namespace distlab::collectives {
namespace {

using namespace testing;  // the helpers of sweep.hpp

void run_sweep(int p, const Sweep& sweep) {
  Failures failures;
  comm::CommOptions options;
  options.timeout = std::chrono::seconds(20);  // a deadlock fails the test instead of hanging it
  try {
    comm::run_thread_ranks(
        p,
        [&](Communicator& comm) { sweep_rank(comm, sweep, failures); },
        options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "p=" << p << ": " << e.what();
  }
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

class AgainstNative : public ::testing::TestWithParam<int> {};

TEST_P(AgainstNative, Float32EveryCountEveryRoot) {
  run_sweep(GetParam(), {{at::kFloat}, {0, 1, 3, 100, 1000, 100003}, /*every_root=*/true});
}

TEST_P(AgainstNative, OtherDtypesThreeRoots) {
  run_sweep(GetParam(),
            {{at::kDouble, at::kBFloat16, at::kHalf, at::kLong}, {0, 1, 3, 100, 1000, 100003}, /*every_root=*/false});
}

// A wider world, one count: halving-doubling folds 4 extra ranks at
// p = 12 (a power of two folds none: p = 8 above is that case).
TEST(AgainstNativeWide, TwelveRanks) { run_sweep(12, {{at::kFloat}, {1001}, /*every_root=*/false}); }

INSTANTIATE_TEST_SUITE_P(WorldSizes, AgainstNative, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "p" + std::to_string(info.param); });

}  // namespace
}  // namespace distlab::collectives
