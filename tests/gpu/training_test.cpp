// The trainer on thread ranks sharing the GPU, against the same run on the
// CPU: DDP, ZeRO-1/2/3, every pipeline schedule, 2 stages x 2 replicas,
// tensor, context (ring and Ulysses) and expert ranks. The GPU's products
// round differently from the CPU's, so the two runs are not bit for bit:
// over 5 steps the losses stay within 1e-4 of each other (relative) and
// the parameters within 1e-3, where a gradient lost or counted twice on
// one device moves them by 1e-2 and more. Recomputation on the GPU ends
// with the plain run's parameters bit for bit (deterministic kernels).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "capstone_runs.hpp"
#include "gpu_device.hpp"
#include "memory/recompute.hpp"
#include "pipeline/schedule.hpp"
#include "support/differences.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

struct LayoutCase {
  std::string name;
  std::function<void(train::TrainerOptions&)> set;
};

std::vector<LayoutCase> every_layout() {
  std::vector<LayoutCase> cases = {
      {"1x2 DDP", [](train::TrainerOptions& o) { o.layout = {1, 2}; }},
      {"1x2 ZeRO-1", [](train::TrainerOptions& o) { o.layout = {1, 2}, o.zero = 1; }},
      {"1x2 ZeRO-2", [](train::TrainerOptions& o) { o.layout = {1, 2}, o.zero = 2; }},
      {"2x2 1F1B (the capstone's layout)", [](train::TrainerOptions& o) { o.layout = {2, 2}; }},
  };
  for (const pipeline::ScheduleKind kind : pipeline::all_kinds())
    cases.push_back({std::string("2x1 ") + pipeline::kind_name(kind), [kind](train::TrainerOptions& o) {
                       o.layout = {2, 1};
                       o.layers = 4;  // a layer for each stage of the schedules holding 2 per rank
                       o.schedule = kind;
                       o.stages_per_rank = train::default_stages_per_rank(kind);
                     }});
  for (const tests::DimensionCase& d : tests::every_dimension()) cases.push_back({d.name, d.set});
  return cases;
}

struct Gap {
  double losses = 0, parameters = 0;
};

// The largest differences between two runs of one layout, rank by rank.
Gap gap_between(const std::vector<train::TrainResult>& a, const std::vector<train::TrainResult>& b) {
  test_support::Worst losses, parameters;
  if (a.size() != b.size()) return {test_support::kInfinite, test_support::kInfinite};
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].step_losses.size() != b[r].step_losses.size()) losses.add(test_support::kInfinite);
    for (size_t s = 0; s < a[r].step_losses.size() && s < b[r].step_losses.size(); ++s)
      losses.add((a[r].step_losses[s] - b[r].step_losses[s]) / b[r].step_losses[s]);
    parameters.add(tests::largest_state_difference(a[r].final_state, b[r].final_state));
  }
  return {losses.value, parameters.value};
}

TEST(GpuTraining, EveryLayoutOnTheDeviceTrainsAsOnTheCpu) {
  DISTLAB_GPU_TEST_DEVICE();
  const std::string device = gpu_tests::device_under_test();
  for (const LayoutCase& c : every_layout()) {
    train::TrainerOptions o = tests::tiny_options(1, 1);
    c.set(o);
    const auto cpu = tests::run_threads(o, tests::small_corpus(), 0, "cpu");
    const auto dev = tests::run_threads(o, tests::small_corpus(), 0, device);
    ASSERT_FALSE(cpu.empty());
    const Gap gap = gap_between(dev, cpu);
    std::printf("  %-36s %s against cpu: losses %.2e, parameters %.2e\n", c.name.c_str(), device.c_str(), gap.losses,
                gap.parameters);
    EXPECT_TRUE(test_support::within(gap.losses, 1e-4)) << c.name << ": losses differ by " << gap.losses;
    EXPECT_TRUE(test_support::within(gap.parameters, 1e-3)) << c.name << ": parameters differ by " << gap.parameters;
    EXPECT_FALSE(dev[0].digest.empty()) << c.name;
  }
}

TEST(GpuTraining, RecomputationEndsWithThePlainRunsParametersBitForBit) {
  DISTLAB_GPU_TEST_DEVICE();
  gpu_tests::make_kernels_deterministic();
  const std::string device = gpu_tests::device_under_test();
  std::vector<tests::DimensionCase> cases = {{"1x1", [](train::TrainerOptions&) {}}};
  for (const tests::DimensionCase& d : tests::every_dimension()) cases.push_back(d);
  for (const tests::DimensionCase& c : cases) {
    train::TrainerOptions o = tests::tiny_options(1, 1);
    o.batches_per_epoch = 2;
    c.set(o);
    const std::string plain = tests::run_threads(o, tests::small_corpus(), 0, device)[0].digest;
    const std::string again = tests::run_threads(o, tests::small_corpus(), 0, device)[0].digest;
    ASSERT_EQ(plain, again) << c.name << ": two plain runs on " << device << " differ: not deterministic here";
    for (const memory::Recompute policy : {memory::Recompute::kFull, memory::Recompute::kSelective}) {
      o.recompute = policy;
      const int64_t before = memory::regions_recomputed();
      const std::string digest = tests::run_threads(o, tests::small_corpus(), 0, device)[0].digest;
      EXPECT_GT(memory::regions_recomputed(), before) << c.name << ": nothing was recomputed";
      EXPECT_EQ(digest, plain) << c.name << " recompute " << memory::to_string(policy) << " on " << device;
      std::printf("  %-24s recompute %-9s on %s: digest %s (plain %s)\n", c.name, memory::to_string(policy),
                  device.c_str(), digest.c_str(), plain.c_str());
    }
    o.recompute = memory::Recompute::kNone;
  }
}

}  // namespace
}  // namespace distlab
