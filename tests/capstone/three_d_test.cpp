// The capstone in three and four dimensions (pipeline x data x context x
// tensor) beyond what LayoutEqualsOneProcess compares: dropout between the
// tensor-parallel regions, checkpoints that resume on a layout with other
// context and data sizes, and the layouts it refuses.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <unistd.h>

#include "capstone_runs.hpp"
#include "support/differences.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using tests::run_threads;
using tests::tiny_options;

// What train() throws for `o` on thread ranks, or "(accepted)".
std::string refusal(const train::TrainerOptions& o) {
  try {
    run_threads(o);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(accepted)";
}

// With dropout the tensor ranks of a stage must draw the same masks where
// the activations are whole (between the regions), or the norms they all
// hold see different inputs and drift apart. After 4 steps at dropout 0.2
// every parameter is still bit-equal on both tensor ranks; and the masks
// are there: the run ends away from the dropout-0 one.
TEST(Capstone3d, WithDropoutTheTensorRanksStayAlike) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.plan.layout.tensor = 2;
  o.loop.batches_per_epoch = 4;
  o.model.dropout = 0.2;
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
  o.model.dropout = 0;
  const auto without = run_threads(o);
  EXPECT_NE(results[0].digest, without[0].digest) << "dropout 0.2 changed nothing";
  EXPECT_NE(results[0].step_losses.at(0), without[0].step_losses.at(0));
  std::printf("  dropout 0.2 on 2 tensor ranks: %zu tensors equal on both; digest %s (dropout 0: %s)\n", compared,
              results[0].digest.c_str(), without[0].digest.c_str());
}

// What does not split is refused on every rank with one line naming the sizes.
TEST(Capstone3d, RefusesWhatDoesNotSplit) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.plan.layout.tensor = 4;  // the tiny model has 2 heads
  const std::string heads = refusal(o);
  EXPECT_NE(heads.find("2 heads do not split among 4 tensor ranks"), std::string::npos) << heads;
  EXPECT_NE(heads.find("tensor sizes that would: 1, 2"), std::string::npos) << heads;
  std::printf("  %s\n", heads.c_str());
}

// The unsplit model's final parameters: each stage's, from the rank of its
// first replica, context and tensor rank.
std::map<std::string, at::Tensor> whole_model(const std::vector<train::TrainResult>& results) {
  std::map<std::string, at::Tensor> whole;
  for (const auto& r : results)
    if (r.place.replica == 0 && r.place.context == 0 && r.place.tensor == 0)
      whole.insert(r.final_state.begin(), r.final_state.end());
  return whole;
}

// A checkpoint holds the unsplit model whatever the context size that wrote
// it: stopped after step 3 on 2 stages x 1 replica x 2 context ranks and
// resumed on 2 x 2 (no context split), and the reverse, each ends where the
// uninterrupted 2 x 2 run ends, to float32 rounding.
TEST(Capstone4d, ResumesFromACheckpointOfAnotherContextSize) {
  train::TrainerOptions o = tiny_options(2, 2);
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 4;
  const auto uninterrupted = run_threads(o);
  const auto reference = whole_model(uninterrupted);
  train::Layout with_context{2, 1};
  with_context.context = 2;
  for (const auto& [before, after] : {std::make_pair(with_context, train::Layout{2, 2}),
                                      std::make_pair(train::Layout{2, 2}, with_context)}) {
    const std::string dir = ::testing::TempDir() + "capstone_context_resume_" + std::to_string(before.context) + "_" +
                            std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    train::TrainerOptions first = o;
    first.plan.layout = before;
    const auto [stopped, resumed] = tests::stop_and_resume_on(first, dir, 3, after);
    const auto got = whole_model(resumed);
    ASSERT_EQ(got.size(), reference.size());
    const double worst = tests::largest_state_difference(got, reference);
    EXPECT_LT(worst, 2e-5) << before.text() << " -> " << after.text();
    EXPECT_EQ(resumed.at(0).steps, 8);
    std::printf("  %s for 3 steps, then %s for 5: largest difference from the uninterrupted 2 x 2 run %.3g\n",
                before.text().c_str(), after.text().c_str(), worst);
    std::filesystem::remove_all(dir);
  }
}

// A model with experts (4 per layer, top-2, dropless, no auxiliary losses:
// every layout computes what one process does) stopped after step 3 on one
// layout and resumed on another: experts whole on 2 tensor ranks, then
// spread over 2 context ranks (each routing its own tokens); spread over 2
// context ranks, then over 2 replicas of a stage cut across 2 tensor ranks
// under ZeRO-3; spread so, then whole on 2 pipeline stages. Each chain ends where the
// uninterrupted run on one rank ends, to float32 rounding: the checkpoint
// holds every expert whole whichever layout wrote it.
TEST(CapstoneExperts, ResumeOnAnotherLayoutEndsWhereOneProcessEnds) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 4;
  o.model.moe.experts = 4, o.model.moe.top_k = 2;
  o.model.moe.balance_coefficient = o.model.moe.z_coefficient = 0;
  const auto reference = whole_model(run_threads(o));
  struct Move {
    train::Layout before, after;
    int experts_before, experts_after;  // the ranks each stage's experts are spread over
    int zero_after = 0;                 // the strategy resumed with
  };
  const Move moves[] = {{{1, 1, 2, 1}, {1, 1, 1, 2}, 1, 2},
                        {{1, 1, 1, 2}, {1, 2, 2, 1}, 2, 2, 3},
                        {{1, 2, 2, 1}, {2, 1, 1, 1}, 2, 1}};
  for (const Move& m : moves) {
    const std::string name = m.before.text() + " (experts over " + std::to_string(m.experts_before) + ") -> " +
                             m.after.text() + " (over " + std::to_string(m.experts_after) +
                             (m.zero_after > 0 ? ", ZeRO-" + std::to_string(m.zero_after) : std::string()) + ")";
    const std::string dir = ::testing::TempDir() + "capstone_experts_resume_" + std::to_string(&m - moves) + "_" +
                            std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    train::TrainerOptions first = o;
    first.plan.layout = m.before;
    first.plan.experts.parallel = m.experts_before;
    const auto runs = tests::stop_and_resume_with(first, dir, 3, 0, [&](train::TrainerOptions& next) {
      next.plan.layout = m.after;
      next.plan.experts.parallel = m.experts_after;
      next.plan.data.zero = m.zero_after;
    });
    const auto& resumed = runs.resumed;
    const auto got = whole_model(resumed);
    ASSERT_EQ(got.size(), reference.size()) << name;
    const double worst = tests::largest_state_difference(got, reference);
    EXPECT_LT(worst, 2e-5) << name;
    EXPECT_EQ(resumed.at(0).steps, 8) << name;
    std::printf("  %s: largest difference from one process %.3g\n", name.c_str(), worst);
    std::filesystem::remove_all(dir);
  }
}

// The context dimension's rules, each refused on every rank with its reason.
TEST(Capstone4d, RefusesWhatTheContextDimensionCannotRun) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.plan.layout.context = 4;  // the tiny model has 2 heads
  o.plan.context.method = context_parallel::Method::kUlysses;
  const std::string heads = refusal(o);
  EXPECT_NE(heads.find("Ulysses gives each context rank whole heads: 2 heads do not divide by 4 context ranks"),
            std::string::npos) << heads;
  EXPECT_NE(heads.find("context sizes that would: 1, 2"), std::string::npos) << heads;
  o.plan.context.method = context_parallel::Method::kRing;
  o.model.causal = false;
  const std::string unmasked = refusal(o);
  EXPECT_NE(unmasked.find("--context 4 needs a causal model"), std::string::npos) << unmasked;
  std::printf("  %s\n  %s\n", heads.c_str(), unmasked.c_str());
}

// A top-k beyond the experts is refused, and so is expert parallelism
// that does not split the ranks the gradients average over (replicas x
// context ranks) or the experts, or without experts, each with its
// reason. Spread over tensor or context ranks, and under every ZeRO stage,
// experts run (ExpertsEqualOneProcess, ZeroEqualsDdp).
TEST(CapstoneExperts, RefusesWhatExpertsCannotRunWith) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.model.moe.experts = 4;
  o.plan.layout = train::Layout{1, 1, 1, 2};
  o.plan.experts.parallel = 4;  // 1 replica x 2 context ranks
  const std::string ranks = refusal(o);
  EXPECT_NE(ranks.find("--expert-parallel 4 borrows its ranks from each stage's 2 replicas x context ranks (the ranks "
                       "its gradients average over): N must divide --replicas x --context"),
            std::string::npos)
      << ranks;
  o = tiny_options(1, 1);
  o.model.moe.experts = 4;
  o.model.moe.top_k = 5;
  const std::string k = refusal(o);
  EXPECT_NE(k.find("--top-k 5 must be in [1, 4] (--experts)"), std::string::npos) << k;
  o.model.moe.top_k = 1;
  o.plan.experts.parallel = 3;  // 1 replica
  EXPECT_NE(refusal(o).find("--expert-parallel 3 borrows its ranks from each stage's 1 replicas x context ranks"),
            std::string::npos);
  o = tiny_options(1, 4);
  o.model.moe.experts = 6;
  o.plan.experts.parallel = 4;
  EXPECT_NE(refusal(o).find("6 experts do not divide by 4 (--experts)"), std::string::npos);
  o.model.moe.experts = 4;
  o.model.moe.experts = 0;
  EXPECT_NE(refusal(o).find("the model has none (--experts E)"), std::string::npos);
  std::printf("  %s\n  %s\n", ranks.c_str(), k.c_str());
}

}  // namespace
}  // namespace distlab
