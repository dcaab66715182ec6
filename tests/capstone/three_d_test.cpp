// The capstone in three dimensions (pipeline x data x tensor) beyond what
// LayoutEqualsOneProcess compares: dropout between the tensor-parallel
// regions, and the layouts it refuses.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <string>

#include "capstone_runs.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using tests::run_threads;
using tests::tiny_options;

// With dropout the tensor ranks of a stage must draw the same masks where
// the activations are whole (between the regions), or the norms they all
// hold see different inputs and drift apart. After 4 steps at dropout 0.2
// every parameter is still bit-equal on both tensor ranks; and the masks
// are there: the run ends away from the dropout-0 one.
TEST(Capstone3d, WithDropoutTheTensorRanksStayAlike) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.layout.tensor = 2;
  o.batches_per_epoch = 4;
  o.dropout = 0.2;
  const auto results = run_threads(o);
  ASSERT_EQ(results.size(), 2u);
  size_t compared = 0;
  for (const auto& [name, value] : results[0].final_state) {
    ASSERT_TRUE(results[1].final_state.count(name)) << name;
    EXPECT_TRUE(at::equal(value, results[1].final_state.at(name))) << name << " differs between the tensor ranks";
    ++compared;
  }
  EXPECT_GT(compared, 0u);
  EXPECT_EQ(results[0].digest, results[1].digest);
  o.dropout = 0;
  const auto without = run_threads(o);
  EXPECT_NE(results[0].digest, without[0].digest) << "dropout 0.2 changed nothing";
  EXPECT_NE(results[0].step_losses.at(0), without[0].step_losses.at(0));
  std::printf("  dropout 0.2 on 2 tensor ranks: %zu tensors equal on both; digest %s (dropout 0: %s)\n", compared,
              results[0].digest.c_str(), without[0].digest.c_str());
}

// What does not split is refused on every rank with one line naming the sizes.
TEST(Capstone3d, RefusesWhatDoesNotSplit) {
  const auto refusal = [](const train::TrainerOptions& o) -> std::string {
    try {
      run_threads(o);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(accepted)";
  };
  train::TrainerOptions o = tiny_options(1, 1);
  o.layout.tensor = 4;  // the tiny model has 2 heads
  const std::string heads = refusal(o);
  EXPECT_NE(heads.find("2 heads do not split among 4 tensor ranks"), std::string::npos) << heads;
  EXPECT_NE(heads.find("tensor sizes that would: 1, 2"), std::string::npos) << heads;
  std::printf("  %s\n", heads.c_str());
}

}  // namespace
}  // namespace distlab
