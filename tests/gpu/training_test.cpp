// The trainer on thread ranks sharing the GPU, against the same run on the
// CPU: DDP, ZeRO-1/2/3, every pipeline schedule, 2 stages x 2 replicas,
// tensor, context (ring and Ulysses) and expert ranks; on one GPU the
// layouts whose ranks wait for each other inside the backward are refused
// instead (comm/backward_thread.hpp), and the test checks the refusal. The GPU's products
// round differently from the CPU's, so the two runs are not bit for bit:
// over 5 steps the losses stay within 1e-4 of each other (relative) and
// the parameters within 1e-3, where a gradient lost or counted twice on
// one device moves them by 1e-2 and more. Recomputation on the GPU ends
// with the plain run's parameters bit for bit (deterministic kernels).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
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
      {"1x2 DDP", [](train::TrainerOptions& o) { o.plan.layout = {1, 2}; }},
      {"1x2 ZeRO-1", [](train::TrainerOptions& o) { o.plan.layout = {1, 2}, o.plan.data.zero = 1; }},
      {"1x2 ZeRO-2", [](train::TrainerOptions& o) { o.plan.layout = {1, 2}, o.plan.data.zero = 2; }},
      {"2x2 1F1B (the capstone's layout)", [](train::TrainerOptions& o) { o.plan.layout = {2, 2}; }},
  };
  for (const pipeline::ScheduleKind kind : pipeline::all_kinds())
    cases.push_back({std::string("2x1 ") + pipeline::kind_name(kind), [kind](train::TrainerOptions& o) {
                       o.plan.layout = {2, 1};
                       o.model.layers = 4;  // a layer for each stage of the schedules holding 2 per rank
                       o.plan.pipeline.schedule = kind;
                       o.plan.pipeline.stages_per_rank = train::default_stages_per_rank(kind);
                     }});
  for (const tests::DimensionCase& d : tests::every_dimension()) cases.push_back({d.name, d.set});
  return cases;
}

// On one GPU the thread ranks share the autograd engine's thread for it,
// where a rank may not wait for another in the middle of its backward
// (comm/backward_thread.hpp): the layouts that do, said here independently of
// the plan, are refused before they start; every other layout runs.
bool waits_inside_backward(const train::TrainerOptions& o) {
  return o.plan.layout.tensor > 1 || o.plan.layout.context > 1 || o.plan.experts.parallel > 1 || o.plan.data.zero == 3;
}

bool ranks_share_a_gpu(const train::TrainerOptions& o, const std::string& device) {
  return device == "cuda" && o.plan.layout.world_size() > static_cast<int>(torch::cuda::device_count());
}

// The run on `device`, or {} after checking that it is refused with the reason.
std::vector<train::TrainResult> run_or_refused(const train::TrainerOptions& o, const std::string& name,
                                               const std::string& device) {
  if (!(ranks_share_a_gpu(o, device) && waits_inside_backward(o)))
    return tests::run_threads(o, tests::small_corpus(), 0, device);
  try {
    tests::run_threads(o, tests::small_corpus(), 0, device);
    ADD_FAILURE() << name << ": ran as thread ranks sharing a GPU, where it cannot";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("thread ranks sharing a GPU cannot run"), std::string::npos) << e.what();
    std::printf("  %-36s %s: refused: thread ranks sharing a GPU wait inside backward\n", name.c_str(),
                device.c_str());
  }
  return {};
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
    const auto dev = run_or_refused(o, c.name, device);
    if (dev.empty()) continue;
    const auto cpu = tests::run_threads(o, tests::small_corpus(), 0, "cpu");
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
    o.loop.batches_per_epoch = 2;
    c.set(o);
    const auto first = run_or_refused(o, c.name, device);
    if (first.empty()) continue;
    const std::string plain = first[0].digest;
    const std::string again = tests::run_threads(o, tests::small_corpus(), 0, device)[0].digest;
    ASSERT_EQ(plain, again) << c.name << ": two plain runs on " << device << " differ: not deterministic here";
    for (const memory::Recompute policy : {memory::Recompute::kFull, memory::Recompute::kSelective}) {
      o.plan.memory.recompute = policy;
      const int64_t before = memory::regions_recomputed();
      const std::string digest = tests::run_threads(o, tests::small_corpus(), 0, device)[0].digest;
      EXPECT_GT(memory::regions_recomputed(), before) << c.name << ": nothing was recomputed";
      EXPECT_EQ(digest, plain) << c.name << " recompute " << memory::to_string(policy) << " on " << device;
      std::printf("  %-24s recompute %-9s on %s: digest %s (plain %s)\n", c.name, memory::to_string(policy),
                  device.c_str(), digest.c_str(), plain.c_str());
    }
    o.plan.memory.recompute = memory::Recompute::kNone;
  }
}

}  // namespace
}  // namespace distlab
