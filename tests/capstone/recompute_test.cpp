// Activation recomputation with every dimension of the capstone
// (TrainerOptions::recompute): full and selective end each layout's run
// with the parameters of the run that keeps everything, bit for bit, on
// thread ranks (dropout off: the ranks share one generator). The layouts:
// tensor ranks (the cut layers recomputed whole, their all-reduces run
// again), context ranks over the ring and Ulysses (the attention core's
// exchanges run again), experts spread over the replicas (the layer's
// all-to-all again, the auxiliary losses joined in the recomputation) and
// ZeRO-3 (the layer's parameters gathered for its backward serve its
// recomputation). Each recomputed run is shown to recompute: the count of
// regions run a second time grows by the layers, microbatches and steps.
// lessons_tests runs the same with dropout on, on gloo processes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capstone_runs.hpp"
#include "memory/recompute.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using memory::Recompute;

TEST(Recomputation, EveryDimensionEndsWithThePlainRunsParameters) {
  for (const tests::DimensionCase& c : tests::every_dimension()) {
    train::TrainerOptions o = tests::tiny_options(2, 1);
    o.loop.batches_per_epoch = 2;
    c.set(o);
    const std::string plain = tests::run_threads(o)[0].digest;
    ASSERT_FALSE(plain.empty()) << c.name;
    for (const Recompute policy : {Recompute::kFull, Recompute::kSelective}) {
      o.plan.memory.recompute = policy;
      const int64_t before = memory::regions_recomputed();
      const std::string digest = tests::run_threads(o)[0].digest;
      // At least one region a layer, microbatch and step on every rank (2 layers in all).
      const int64_t at_least = 2 * o.loop.batches_per_epoch * o.plan.layout.world_size() / o.plan.layout.pipeline;
      EXPECT_GE(memory::regions_recomputed() - before, at_least) << c.name << " " << memory::to_string(policy);
      EXPECT_EQ(digest, plain) << c.name << " recompute " << memory::to_string(policy);
    }
  }
}

// The zero-bubble schedules split a backward into the input's gradient (B)
// and the parameters' (W). A layer recomputed whole (or all but its
// products) computes its parameters' gradients inside its own backward,
// with its input's: its stage runs the whole backward in B. Each run ends
// with the parameters of the same schedule's run that keeps everything,
// under DDP, ZeRO-2 and ZeRO-3 (whose hooks are armed for the stage's last
// backward), zb_h1 on 2 stages and zbv on 2 ranks x 2 stages.
TEST(Recomputation, SplitBackwardSchedulesRecomputingParametersEndWithThePlainRunsParameters) {
  struct Case {
    pipeline::ScheduleKind kind;
    int stages_per_rank;
  };
  for (const Case& k : {Case{pipeline::ScheduleKind::kZeroBubbleH1, 1}, Case{pipeline::ScheduleKind::kZeroBubbleV, 2}})
    for (const int zero : {0, 2, 3}) {
      train::TrainerOptions o = tests::tiny_options(2, 2);
      o.loop.batches_per_epoch = 2;
      o.model.layers = 4;
      o.plan.pipeline.schedule = k.kind;
      o.plan.pipeline.stages_per_rank = k.stages_per_rank;
      o.plan.pipeline.microbatches = 2;
      o.plan.data.zero = zero;
      const std::string name = pipeline::kind_name(k.kind) + (zero ? " zero" + std::to_string(zero) : std::string(" ddp"));
      const std::string plain = tests::run_threads(o)[0].digest;
      ASSERT_FALSE(plain.empty()) << name;
      for (const Recompute policy : {Recompute::kFull, Recompute::kMatmuls}) {
        o.plan.memory.recompute = policy;
        const int64_t before = memory::regions_recomputed();
        const std::string digest = tests::run_threads(o)[0].digest;
        EXPECT_GT(memory::regions_recomputed(), before) << name << " " << memory::to_string(policy);
        EXPECT_EQ(digest, plain) << name << " recompute " << memory::to_string(policy);
      }
    }
}

}  // namespace
}  // namespace distlab
