// The gradient reductions' end of backward handed to the thread that called
// backward, as it is from the CUDA engine's thread that thread ranks sharing
// a GPU run their backward on (comm/backward_thread.hpp): DDP, ZeRO-1/2/3
// and the capstone's 2 x 2 train to the same parameters, bit for bit, as
// when the engine's own end-of-backward callback waits for the buckets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capstone_runs.hpp"
#include "comm/backward_thread.hpp"

namespace distlab {
namespace {

TEST(BackwardCallerTraining, ReductionsEndedOnTheCallingThreadTrainAlike) {
  struct Case {
    const char* name;
    train::Layout layout;
    int zero;
  };
  for (const Case& c : std::vector<Case>{{"1x2 DDP", {1, 2}, 0},
                                         {"1x2 ZeRO-1", {1, 2}, 1},
                                         {"1x2 ZeRO-2", {1, 2}, 2},
                                         {"1x2 ZeRO-3", {1, 2}, 3},
                                         {"2x2 DDP", {2, 2}, 0}}) {
    train::TrainerOptions o = tests::tiny_options(1, 1);
    o.plan.layout = c.layout;
    o.plan.data.zero = c.zero;
    o.loop.batches_per_epoch = 3;
    const auto engine = tests::run_threads(o);
    comm::hand_over_for_tests(true);
    const auto handed = tests::run_threads(o);
    comm::hand_over_for_tests(false);
    ASSERT_EQ(handed.size(), engine.size()) << c.name;
    for (size_t r = 0; r < engine.size(); ++r) {
      EXPECT_EQ(handed[r].digest, engine[r].digest) << c.name << ", rank " << r;
      EXPECT_EQ(handed[r].step_losses, engine[r].step_losses) << c.name << ", rank " << r;
    }
  }
}

}  // namespace
}  // namespace distlab
