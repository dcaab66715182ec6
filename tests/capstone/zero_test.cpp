// The capstone with --zero 1|2|3 (lib/train/data_parallel.hpp) against the
// same layout trained with DDP: sharding changes where the gradients are
// averaged and who steps which elements, not the arithmetic, so the losses,
// gradient norms and final parameters are the DDP run's to float32
// rounding. And lesson 11's --zero flag, run as a user runs it.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include <unistd.h>

#include "capstone_runs.hpp"
#include "lessons/run_program.hpp"
#include "support/differences.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using tests::run_threads;
using tests::tiny_options;

// The DDP run of a layout, computed once for all the ZeRO stages compared with it.
const std::vector<train::TrainResult>& ddp_run(int P, int R) {
  static std::map<std::pair<int, int>, std::vector<train::TrainResult>> runs;
  auto it = runs.find({P, R});
  if (it == runs.end()) it = runs.emplace(std::make_pair(P, R), run_threads(tiny_options(P, R))).first;
  return it->second;
}

class ZeroEqualsDdp : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

// P x R ranks, each stage's replica group sharding with ZeRO-k, for 5 steps
// of the tiny model: the same mean losses, gradient norms (the whole
// model's, from the shards), validation loss and parameters as DDP; the
// replicas bit-identical (all-gathered from one shard); one reduce-scatter
// round per step (the microbatches accumulate locally).
TEST_P(ZeroEqualsDdp, LossesNormsAndParameters) {
  const auto [P, R, zero] = GetParam();
  train::TrainerOptions o = tiny_options(P, R);
  o.zero = zero;
  const auto& ddp = ddp_run(P, R);
  const auto sharded = run_threads(o);

  for (size_t step = 0; step < static_cast<size_t>(o.batches_per_epoch); ++step) {
    double mean = 0, ddp_mean = 0;
    for (int r = 0; r < R; ++r) {
      const auto last = static_cast<size_t>(r * P + P - 1);
      mean += sharded[last].step_losses.at(step) / R;
      ddp_mean += ddp[last].step_losses.at(step) / R;
    }
    EXPECT_NEAR(mean, ddp_mean, 2e-5 * ddp_mean) << "step " << step;
    for (size_t rank = 0; rank < sharded.size(); ++rank)
      EXPECT_NEAR(sharded[rank].grad_norms.at(step), ddp[rank].grad_norms.at(step), 1e-5 * ddp[rank].grad_norms[step])
          << "rank " << rank << " step " << step;
    std::printf("  ZeRO-%d %dx%d step %zu: loss %.7f (DDP %.7f), gradient norm %.7f (DDP %.7f)\n", zero, P, R, step,
                mean, ddp_mean, sharded[0].grad_norms.at(step), ddp[0].grad_norms.at(step));
  }
  for (size_t rank = 0; rank < sharded.size(); ++rank) {
    EXPECT_NEAR(sharded[rank].valid_losses.at(0), ddp[rank].valid_losses.at(0), 2e-5 * ddp[rank].valid_losses[0]);
    ASSERT_EQ(sharded[rank].data_parallel.size(), 1u) << "rank " << rank;
    const train::DataParallelStats& stats = sharded[rank].data_parallel.front();
    EXPECT_EQ(stats.strategy, "ZeRO-" + std::to_string(zero)) << "rank " << rank;
    EXPECT_EQ(stats.synced_steps, o.batches_per_epoch) << "rank " << rank << ": one round per step";
    EXPECT_EQ(stats.ddp.synced_steps, 0) << "rank " << rank << ": no DDP under --zero";
    EXPECT_EQ(sharded[rank].digest, sharded[0].digest) << "rank " << rank;
  }

  test_support::Worst worst;
  size_t compared = 0;
  for (int s = 0; s < P; ++s) {
    for (const auto& [name, value] : sharded[static_cast<size_t>(s)].final_state) {
      const auto& reference = ddp[static_cast<size_t>(s)].final_state;
      ASSERT_TRUE(reference.count(name)) << name;
      worst.add(value, reference.at(name));
      ++compared;
      for (int r = 1; r < R; ++r)
        EXPECT_TRUE(at::equal(value, sharded[static_cast<size_t>(r * P + s)].final_state.at(name))) << name;
    }
  }
  size_t expected = 0;
  for (int s = 0; s < P; ++s) expected += ddp[static_cast<size_t>(s)].final_state.size();
  EXPECT_EQ(compared, expected) << "the stages together hold every parameter once";
  EXPECT_LT(worst.value, 2e-5) << "largest parameter difference from the DDP run";
  std::printf("  ZeRO-%d %dx%d: %zu parameters, largest difference from DDP %.3g, digest %s (DDP %s)\n", zero, P, R,
              compared, worst.value, sharded[0].digest.c_str(), ddp[0].digest.c_str());
}

INSTANTIATE_TEST_SUITE_P(Capstone, ZeroEqualsDdp,
                         ::testing::Values(std::make_tuple(2, 2, 1), std::make_tuple(2, 2, 2),
                                           std::make_tuple(1, 4, 2), std::make_tuple(2, 2, 3),
                                           std::make_tuple(1, 4, 3)),
                         [](const auto& info) {
                           return "zero" + std::to_string(std::get<2>(info.param)) + "_" +
                                  std::to_string(std::get<0>(info.param)) + "x" +
                                  std::to_string(std::get<1>(info.param));
                         });

// --zero 2 and 3 over an epoch boundary, stopped after step 3 (in epoch 2,
// lr 4.75 from StepLR) and resumed: the uninterrupted run ends with DDP's
// parameters (so StepLR's lr reached the sharded optimizer, and ZeRO-3's
// evaluation, best model and test saw the whole parameters), and the
// resumed one bit for bit with the uninterrupted one (checkpoints hold the
// whole parameters, as with DDP: plain SGD keeps no state to shard;
// ZeRO-3 gathers them to write and keeps its chunk of what it loads).
class CapstoneZero : public ::testing::TestWithParam<int> {};

TEST_P(CapstoneZero, LrScheduleAndResumeMatch) {
  const int zero = GetParam();
  const std::string dir =
      ::testing::TempDir() + "capstone_zero" + std::to_string(zero) + "_resume_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::TrainerOptions o = tiny_options(2, 2);
  o.epochs = 2;
  o.batches_per_epoch = 2;
  const auto ddp = run_threads(o);
  o.zero = zero;
  const auto uninterrupted = run_threads(o);
  test_support::Worst worst;
  for (int s = 0; s < 2; ++s)
    for (const auto& [name, value] : uninterrupted[static_cast<size_t>(s)].final_state)
      worst.add(value, ddp[static_cast<size_t>(s)].final_state.at(name));
  EXPECT_LT(worst.value, 2e-5) << "largest parameter difference from DDP after 2 epochs";
  EXPECT_NEAR(uninterrupted[1].test_loss, ddp[1].test_loss, 2e-5 * ddp[1].test_loss);

  const auto [first, resumed] = tests::stop_and_resume(o, dir, 3);
  EXPECT_NE(first[0].digest, uninterrupted[0].digest);
  for (size_t rank = 0; rank < resumed.size(); ++rank) {
    EXPECT_EQ(resumed[rank].digest, uninterrupted[rank].digest) << "rank " << rank;
    EXPECT_EQ(resumed[rank].test_loss, uninterrupted[rank].test_loss);
  }
  std::printf("  ZeRO-%d after 2 epochs: largest difference from DDP %.3g; digest %s uninterrupted (DDP %s), %s after "
              "the stop, %s resumed\n",
              zero, worst.value, uninterrupted[0].digest.c_str(), ddp[0].digest.c_str(), first[0].digest.c_str(),
              resumed[0].digest.c_str());
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Capstone, CapstoneZero, ::testing::Values(2, 3),
                         [](const auto& info) { return "zero" + std::to_string(info.param); });

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

// lesson_11_capstone --zero: 1, 2 and 3 train, say so and end as DDP does;
// anything else is a flag error, before any rank hangs.
TEST(Lesson11Zero, AcceptsOneTwoThreeRejectsOthers) {
  using lessons::testing::run;
  const std::string lesson = LESSON_11;
  const std::string flags = " --backend threads --preset tiny --dropout 0 --epochs 1 --batches-per-epoch 2 --eval-batches 1";
  const auto ddp = run(lesson + flags);
  ASSERT_EQ(ddp.status, 0) << ddp.output;
  EXPECT_TRUE(contains(ddp.output, "replica groups (DDP per stage): {0, 2} {1, 3}")) << ddp.output;
  // The end-of-training line, the same to the printed digits.
  const auto test_line = [](const std::string& output) {
    const size_t at = output.find("| End of training |");
    return at == std::string::npos ? std::string("(none)") : output.substr(at, output.find('\n', at) - at);
  };
  EXPECT_NE(test_line(ddp.output), "(none)");
  for (int zero : {1, 3}) {
    const auto sharded = run(lesson + flags + " --zero " + std::to_string(zero));
    ASSERT_EQ(sharded.status, 0) << sharded.output;
    EXPECT_TRUE(contains(sharded.output, "replica groups (ZeRO-" + std::to_string(zero) + " per stage): {0, 2} {1, 3}"))
        << sharded.output;
    EXPECT_EQ(test_line(sharded.output), test_line(ddp.output)) << "--zero " << zero;
  }
  for (const std::string bad : {"4", "-1", "two"}) {
    const auto r = run(lesson + flags + " --zero " + bad);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_TRUE(contains(r.output, "--zero")) << r.output;
  }
}

}  // namespace
}  // namespace distlab
