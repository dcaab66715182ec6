// Going on with fewer ranks, or more (lib/train/elastic.hpp): the layout
// chosen for a world, a checkpoint re-cut for another stage count, and
// training stopped on one layout and resumed on another ending where the
// uninterrupted run ends (dropout 0: any layout computes what one process
// does, to float32 rounding), with every step run once.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "capstone_runs.hpp"
#include "support/print_names.hpp"
#include "support/differences.hpp"
#include "checkpoint/module_state.hpp"
#include "train/elastic.hpp"
#include "train/stage_model.hpp"

namespace distlab {
namespace {

using tests::run_threads;
using tests::tiny_options;
using train::Layout;

std::string text(const Layout& layout) {
  const std::string two = std::to_string(layout.pipeline) + "x" + std::to_string(layout.replicas);
  return layout.tensor == 1 ? two : two + "x" + std::to_string(layout.tensor);
}

TEST(FitLayout, KeepsTheStagesWhenItCanElseTheMostThatDivide) {
  struct Case {
    int world;
    Layout wanted;
    int max_stages;
    std::string expected;
  };
  const Case cases[] = {
      {4, {2, 2}, 2, "2x2"}, {2, {2, 2}, 2, "2x1"}, {6, {2, 2}, 8, "2x3"}, {3, {1, 4}, 2, "1x3"},
      {3, {2, 2}, 2, "1x3"}, {6, {4, 1}, 8, "3x2"}, {8, {4, 2}, 2, "2x4"}, {1, {2, 2}, 2, "1x1"},
      // The tensor size is kept; whole tensor groups are laid out as stages x replicas.
      {8, {2, 2, 2}, 2, "2x2x2"}, {6, {2, 2, 2}, 2, "1x3x2"}, {4, {2, 2, 2}, 2, "2x1x2"}, {2, {2, 2, 2}, 2, "1x1x2"},
  };
  for (const Case& c : cases) {
    const train::FittedLayout fitted = train::fit_layout(c.world, c.wanted, c.max_stages);
    EXPECT_EQ(text(fitted.layout), c.expected) << c.world << " ranks, asked " << text(c.wanted);
    EXPECT_EQ(fitted.layout.world_size(), c.world);
    EXPECT_NE(fitted.reason.find(fitted.layout.text()), std::string::npos) << fitted.reason;
  }
  EXPECT_NE(train::fit_layout(3, {2, 2}, 2).reason.find("3 ranks do not split into 2 stages"), std::string::npos);
  EXPECT_NE(train::fit_layout(8, {4, 2}, 2).why.find("at most 2 stages"), std::string::npos);
  EXPECT_NE(train::fit_layout(6, {2, 2, 2}, 2).reason.find("3 tensor groups do not split into 2 stages"),
            std::string::npos);
  EXPECT_THROW(train::fit_layout(0, {2, 2}, 2), std::invalid_argument);
  try {
    train::fit_layout(5, {2, 2, 2}, 2);
    ADD_FAILURE() << "5 ranks accepted for tensor groups of 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("use a multiple of 2 ranks"), std::string::npos) << e.what();
  }
}

// The parts of a 2-stage cut, re-cut for one stage, are the whole model's
// tensors; for a stage that wants a name no part has, an error names it.
TEST(Recut, UnionOfThePartsIsTheWholeModel) {
  models::TransformerLmOptions options = models::transformer_lm_preset("tiny", 50);
  options.nlayers = 4;
  const auto whole = checkpoint::named_state(*train::build_stage(options, 0, 1, 7));
  std::vector<checkpoint::CheckpointPart> parts(2);
  for (int s = 0; s < 2; ++s) {
    parts[static_cast<size_t>(s)].model = checkpoint::named_state(*train::build_stage(options, s, 2, 7));
    parts[static_cast<size_t>(s)].ints = {{"step", 3}};
  }
  std::set<std::string> names;
  for (const auto& [name, tensor] : whole) names.insert(name);
  const checkpoint::CheckpointPart one = train::recut(parts, names, 0);
  ASSERT_EQ(one.model.size(), whole.size());
  for (const auto& [name, tensor] : whole) EXPECT_TRUE(at::equal(one.model.at(name), tensor)) << name;
  EXPECT_EQ(one.ints.at("step"), 3);
  names.insert("layers.9.linear1.weight");
  try {
    train::recut(parts, names, 0);
    ADD_FAILURE() << "a name no part holds was accepted";
  } catch (const checkpoint::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.9.linear1.weight"), std::string::npos) << e.what();
  }
}

// Largest difference between two runs' final parameters, all stages (each
// run's stage s is world rank s of replica 0); +infinity for a NaN.
double largest_difference(const std::vector<train::TrainResult>& a, const std::vector<train::TrainResult>& b) {
  std::map<std::string, at::Tensor> whole_a, whole_b;
  for (const auto& r : a)
    if (r.place.replica == 0) whole_a.insert(r.final_state.begin(), r.final_state.end());
  for (const auto& r : b)
    if (r.place.replica == 0) whole_b.insert(r.final_state.begin(), r.final_state.end());
  EXPECT_EQ(whole_a.size(), whole_b.size());
  test_support::Worst worst;
  for (const auto& [name, value] : whole_a) {
    if (!whole_b.count(name)) {
      ADD_FAILURE() << name << " missing";
      continue;
    }
    worst.add(value, whole_b.at(name));
  }
  return worst.value;
}

struct Move {
  Layout before;
  int ranks_after;
  std::string expected_after;
  int zero = 0;  // 0: DDP; 1-3: each stage's replicas shard (ZeRO), resharded for the new replica count
  int tensor_after = 0;  // > 0: resumed with this many tensor ranks per stage (the checkpoint is the unsplit model's)
};
void PrintTo(const Move& m, std::ostream* os) {
  *os << m.before.text() << " -> " << m.ranks_after << " ranks (" << m.expected_after << ")"
      << (m.zero ? ", ZeRO-" + std::to_string(m.zero) : "")
      << (m.tensor_after ? ", tensor " + std::to_string(m.tensor_after) : "");
}

class ElasticResume : public ::testing::TestWithParam<Move> {};

// Stopped after step 3 on one layout, resumed on another world: the layout
// is fitted, the checkpoint read (re-cut when the stage count changed), the
// remaining 5 steps run there, and the final parameters are the
// uninterrupted 2 x 2 run's to float32 rounding.
TEST_P(ElasticResume, EndsWhereTheUninterruptedRunEnds) {
  const Move move = GetParam();
  const std::string dir = ::testing::TempDir() + "elastic_" + text(move.before) + "_" +
                          std::to_string(move.ranks_after) + "_zero" + std::to_string(move.zero) + "_" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::TrainerOptions o = tiny_options(2, 2);
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 4;
  static const auto uninterrupted = run_threads(o);

  o.plan.layout = move.before;
  o.checkpoints.elastic = true;
  o.plan.data.zero = move.zero;
  const auto [first, resumed] = tests::stop_and_resume(o, dir, 3, move.ranks_after, move.tensor_after);
  ASSERT_EQ(resumed.size(), static_cast<size_t>(move.ranks_after));
  for (const auto& r : resumed) {
    EXPECT_EQ(text(r.layout), move.expected_after);
    EXPECT_EQ(r.steps, 8) << "every step run once: 3 before, 5 after";
    if (r.place.stage == r.layout.pipeline - 1)
      EXPECT_EQ(r.step_losses.size(), 5u) << "steps 4-8 ran on the new layout";
  }
  const double worst = largest_difference(resumed, uninterrupted);
  EXPECT_LT(worst, 2e-5) << text(move.before) << " -> " << move.expected_after;
  EXPECT_NEAR(resumed.back().test_loss, uninterrupted.back().test_loss, 2e-5 * uninterrupted.back().test_loss);
  std::printf("  %s for 3 steps, then %s for 5 (%s): largest difference from the uninterrupted 2x2 DDP run %.3g\n",
              text(move.before).c_str(), move.expected_after.c_str(),
              move.zero ? ("ZeRO-" + std::to_string(move.zero)).c_str() : "DDP", worst);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Capstone, ElasticResume,
                         ::testing::Values(Move{{2, 2}, 2, "2x1"},   // lost a replica
                                           Move{{1, 4}, 3, "1x3"},   // lost one of four, columns 7/7/6
                                           Move{{2, 2}, 3, "1x3"},   // the stages re-cut
                                           Move{{2, 1}, 4, "2x2"},   // back up
                                           Move{{2, 2, 2}, 6, "1x3x2"},  // tensor groups kept, stages re-cut
                                           // Another tensor size: the layers cut again from the unsplit checkpoint.
                                           Move{{2, 2, 2}, 4, "2x2", 0, 1}, Move{{2, 2}, 4, "2x1x2", 0, 2},
                                           // Sharded: the shards are cut again for the new replica count
                                           // (the capstone's SGD keeps no state; the parameters are whole
                                           // in the checkpoint, zero::ShardedCheckpointer re-shards Adam's).
                                           Move{{2, 2}, 3, "1x3", 3},
                                           Move{{1, 4}, 3, "1x3", 1},
                                           Move{{2, 1}, 4, "2x2", 2}),
                         [](const auto& info) {
                           return text(info.param.before) + "_to_" + info.param.expected_after +
                                  (info.param.zero ? "_zero" + std::to_string(info.param.zero) : "");
                         });

}  // namespace
}  // namespace distlab
