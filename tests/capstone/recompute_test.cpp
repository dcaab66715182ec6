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

}  // namespace
}  // namespace distlab
