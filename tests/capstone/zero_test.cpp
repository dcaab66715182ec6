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
#include <ostream>

#include <unistd.h>

#include "capstone_runs.hpp"
#include "lessons/run_program.hpp"
#include "pipeline/schedule.hpp"
#include "support/differences.hpp"
#include "support/small_corpus.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using tests::run_threads;
using tests::tiny_options;

// A layout, a schedule and a ZeRO stage to hold equal to DDP.
struct ZeroCase {
  train::Layout layout;
  int zero = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::k1F1B;
  int experts_over = 0;  // > 0: 4 experts per layer (top-2, dropless, no auxiliary losses) spread over so many ranks
};

std::string name_of(const ZeroCase& c) {
  const train::Layout& l = c.layout;
  std::string name = "zero" + std::to_string(c.zero) + "_" + std::to_string(l.pipeline) + "x" +
                     std::to_string(l.replicas) + (l.tensor > 1 ? "x" + std::to_string(l.tensor) : "") +
                     (l.context > 1 ? "_context" + std::to_string(l.context) : "");
  if (c.schedule != pipeline::ScheduleKind::k1F1B) name += std::string("_") + pipeline::kind_name(c.schedule);
  if (c.experts_over > 0) name += "_experts_over" + std::to_string(c.experts_over);
  return name;
}
void PrintTo(const ZeroCase& c, std::ostream* os) { *os << name_of(c); }

train::TrainerOptions options_of(const ZeroCase& c, int zero) {
  train::TrainerOptions o = tiny_options(c.layout.pipeline, c.layout.replicas);
  o.plan.layout.tensor = c.layout.tensor;
  o.plan.layout.context = c.layout.context;
  o.plan.pipeline.schedule = c.schedule;
  o.plan.pipeline.stages_per_rank = train::default_stages_per_rank(c.schedule);
  if (o.plan.pipeline.stages_per_rank > 1) o.model.layers = 2 * c.layout.pipeline;  // a layer for each of a rank's stages
  o.plan.data.zero = zero;
  if (c.experts_over > 0) {
    o.model.moe.experts = 4, o.model.moe.top_k = 2;
    o.model.moe.balance_coefficient = o.model.moe.z_coefficient = 0;
    o.plan.experts.parallel = c.experts_over;
  }
  return o;
}

// The DDP run of a layout and schedule, computed once for all the ZeRO stages compared with it.
const std::vector<train::TrainResult>& ddp_run(const ZeroCase& c) {
  static std::map<std::string, std::vector<train::TrainResult>> runs;
  const std::string key = c.layout.text() + " " + pipeline::kind_name(c.schedule) + " " + std::to_string(c.experts_over);
  auto it = runs.find(key);
  if (it == runs.end()) it = runs.emplace(key, run_threads(options_of(c, 0))).first;
  return it->second;
}

class ZeroEqualsDdp : public ::testing::TestWithParam<ZeroCase> {};

// P x R (x T) ranks, each held stage's replica group sharding with ZeRO-k
// (cut across T tensor ranks: each tensor rank's replicas shard its
// pieces; with experts spread over N ranks, a second ZeRO-k shards them
// over the ranks holding the same ones, ZeRO-2 under ZeRO-3), for 5 steps
// of the tiny model: the same mean losses, gradient
// norms (the whole model's, from the shards), validation loss and
// parameters as DDP; the replicas and tensor ranks bit-identical; one
// reduce-scatter round per step and stage (the microbatches accumulate
// locally).
TEST_P(ZeroEqualsDdp, LossesNormsAndParameters) {
  const ZeroCase c = GetParam();
  const train::TrainerOptions o = options_of(c, c.zero);
  const auto& ddp = ddp_run(c);
  const auto sharded = run_threads(o);
  ASSERT_EQ(sharded.size(), ddp.size());

  const int R = c.layout.replicas;
  const auto mean_loss = [&](const std::vector<train::TrainResult>& run, size_t step) {
    double mean = 0;  // the replicas' mean losses, from the rank holding the last stage (tensor and context rank 0)
    for (const auto& r : run)
      if (r.place.tensor == 0 && r.place.context == 0 && !r.step_losses.empty()) mean += r.step_losses.at(step) / R;
    return mean;
  };
  for (size_t step = 0; step < static_cast<size_t>(o.loop.batches_per_epoch); ++step) {
    const double mean = mean_loss(sharded, step), ddp_mean = mean_loss(ddp, step);
    EXPECT_GT(mean, 0) << "step " << step;
    EXPECT_NEAR(mean, ddp_mean, 2e-5 * ddp_mean) << "step " << step;
    for (size_t rank = 0; rank < sharded.size(); ++rank)
      EXPECT_NEAR(sharded[rank].grad_norms.at(step), ddp[rank].grad_norms.at(step), 1e-5 * ddp[rank].grad_norms[step])
          << "rank " << rank << " step " << step;
    std::printf("  %s step %zu: loss %.7f (DDP %.7f), gradient norm %.7f (DDP %.7f)\n", name_of(c).c_str(), step,
                mean, ddp_mean, sharded[0].grad_norms.at(step), ddp[0].grad_norms.at(step));
  }
  test_support::Worst worst;
  size_t compared = 0, expected = 0;
  for (size_t rank = 0; rank < sharded.size(); ++rank) {
    const train::TrainResult& r = sharded[rank];
    EXPECT_NEAR(r.valid_losses.at(0), ddp[rank].valid_losses.at(0), 2e-5 * ddp[rank].valid_losses[0]);
    ASSERT_EQ(r.data_parallel.size(), static_cast<size_t>(o.plan.pipeline.stages_per_rank)) << "rank " << rank << ": one per stage";
    for (const train::DataParallelStats& stats : r.data_parallel) {
      EXPECT_EQ(stats.strategy, "ZeRO-" + std::to_string(c.zero)) << "rank " << rank;
      EXPECT_EQ(stats.synced_steps, o.loop.batches_per_epoch) << "rank " << rank << ": one round per step";
      EXPECT_EQ(stats.ddp.synced_steps, 0) << "rank " << rank << ": no DDP under --zero";
    }
    EXPECT_EQ(r.digest, sharded[0].digest) << "rank " << rank;
    // Every rank holds its stages' unsplit parameters (tensor ranks gather theirs).
    for (const auto& [name, value] : r.final_state) {
      ASSERT_TRUE(ddp[rank].final_state.count(name)) << name;
      worst.add(value, ddp[rank].final_state.at(name));
      if (r.place.replica == 0 && r.place.tensor == 0 && r.place.context == 0) ++compared;
      for (const auto& other : sharded)  // replicas and tensor ranks of the same stage: bit-identical
        if (other.place.stage == r.place.stage && other.final_state.count(name))
          EXPECT_TRUE(at::equal(value, other.final_state.at(name))) << name;
    }
    if (r.place.replica == 0 && r.place.tensor == 0 && r.place.context == 0)
      expected += ddp[rank].final_state.size();
  }
  EXPECT_GT(compared, 0u);
  EXPECT_EQ(compared, expected) << "the stages together hold every parameter once";
  EXPECT_LT(worst.value, 2e-5) << "largest parameter difference from the DDP run";
  std::printf("  %s: %zu parameters, largest difference from DDP %.3g, digest %s (DDP %s)\n", name_of(c).c_str(),
              compared, worst.value, sharded[0].digest.c_str(), ddp[0].digest.c_str());
}

using pipeline::ScheduleKind;
INSTANTIATE_TEST_SUITE_P(Capstone, ZeroEqualsDdp,
                         ::testing::Values(ZeroCase{{2, 2}, 1}, ZeroCase{{2, 2}, 2}, ZeroCase{{1, 4}, 2},
                                           ZeroCase{{2, 2}, 3}, ZeroCase{{1, 4}, 3},
                                           // With tensor parallelism: each tensor rank's replicas shard its pieces.
                                           ZeroCase{{2, 2, 2}, 1}, ZeroCase{{1, 2, 2}, 2}, ZeroCase{{2, 2, 2}, 3},
                                           // Two stages per rank: each stage's own replica group shards it.
                                           ZeroCase{{2, 2}, 1, ScheduleKind::kInterleaved1F1B},
                                           ZeroCase{{2, 2}, 2, ScheduleKind::kZeroBubbleV},
                                           ZeroCase{{2, 2}, 3, ScheduleKind::kDualPipeV},
                                           ZeroCase{{2, 2}, 2, ScheduleKind::kLoopedBFS},
                                           ZeroCase{{2, 2}, 1, ScheduleKind::kInterleavedZeroBubble},
                                           // All at once.
                                           ZeroCase{{2, 2, 2}, 3, ScheduleKind::kInterleaved1F1B},
                                           // With context parallelism: each stage's data x context ranks shard it.
                                           ZeroCase{{2, 1, 1, 2}, 1}, ZeroCase{{1, 2, 1, 2}, 3},
                                           // experts spread: their own ZeRO over their copies
                                           ZeroCase{{1, 4}, 1, ScheduleKind::k1F1B, 2},
                                           ZeroCase{{2, 2}, 2, ScheduleKind::k1F1B, 2},
                                           ZeroCase{{1, 2, 2}, 1, ScheduleKind::k1F1B, 2},
                                           ZeroCase{{1, 2, 1, 2}, 2, ScheduleKind::k1F1B, 4},
                                           ZeroCase{{1, 4}, 3, ScheduleKind::k1F1B, 2},
                                           ZeroCase{{2, 2, 2}, 3, ScheduleKind::k1F1B, 2}),
                         [](const auto& info) { return name_of(info.param); });

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
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 2;
  const auto ddp = run_threads(o);
  o.plan.data.zero = zero;
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
  const std::string flags = " --data " + test_support::small_corpus_folder() +
                            " --backend threads --preset tiny --dropout 0 --epochs 1 --batches-per-epoch 2 --eval-batches 1";
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
