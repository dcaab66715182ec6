// The capstone trainer (lib/train/trainer.hpp) on thread ranks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <unistd.h>

#include "capstone_runs.hpp"
#include "support/print_names.hpp"
#include "data/corpus_stats.hpp"
#include "reference_training.hpp"
#include "pipeline/schedule.hpp"
#include "support/differences.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using tests::small_corpus;
using tests::run_threads;
using tests::tiny_options;

using test_support::largest_difference;

// P x R (x C x T) ranks training the tiny model for 5 steps give the
// one-process run's losses, gradient norms, validation loss and parameters,
// to float32 rounding: the pipeline cuts the batch into microbatches, DDP
// sums the replicas' halves, the context ranks attend their tokens to the
// whole sequence round a ring (or by another method) and the tensor ranks
// sum their heads' and columns' parts, in other orders of addition than
// one process.
void expect_equals_one_process(const train::TrainerOptions& o) {
  const int P = o.plan.layout.pipeline, R = o.plan.layout.replicas, T = o.plan.layout.tensor, C = o.plan.layout.context;
  const std::string what = o.plan.layout.text() + ", " + pipeline::kind_name(o.plan.pipeline.schedule) +
                           (C > 1 ? std::string(", ") + context_parallel::to_string(o.plan.context.method) + " " +
                                        context_parallel::to_string(o.plan.context.layout)
                                  : std::string());
  const tests::ReferenceResult ref = tests::train_one_process(small_corpus(), o);
  const auto results = run_threads(o);
  const auto at_place = [&](int replica, int stage, int tensor, int context) -> const train::TrainResult& {
    train::Place place;
    place.replica = replica, place.stage = stage, place.tensor = tensor, place.context = context;
    const train::TrainResult& r = results.at(static_cast<size_t>(train::rank_of(place, o.plan.layout)));
    EXPECT_TRUE(r.place.replica == replica && r.place.stage == stage && r.place.tensor == tensor &&
                r.place.context == context);
    return r;
  };
  // The rank holding the last stage (the last pipeline rank, or rank 0 in a
  // V) reports the losses; its context ranks report the same average.
  std::vector<const train::TrainResult*> loss_ranks;
  for (const auto& r : results)
    if (r.place.tensor == 0 && r.place.context == 0 && !r.step_losses.empty()) loss_ranks.push_back(&r);
  for (const auto& r : results)  // against context rank 0 of the same replica
    if (r.place.tensor == 0 && r.place.context > 0 && !r.step_losses.empty())
      EXPECT_EQ(r.step_losses, at_place(r.place.replica, r.place.stage, 0, 0).step_losses)
          << what << ": context rank " << r.place.context;
  ASSERT_EQ(loss_ranks.size(), static_cast<size_t>(R)) << what << ": one rank per replica holds the loss";
  const auto mean_loss = [&](size_t step) {  // the replicas' mean losses, averaged: the whole batch's
    double mean = 0;
    for (const auto* r : loss_ranks) mean += r->step_losses.at(step) / R;
    return mean;
  };

  for (size_t step = 0; step < ref.step_losses.size(); ++step) {
    EXPECT_NEAR(mean_loss(step), ref.step_losses[step], 2e-5 * ref.step_losses[step]) << what << " step " << step;
    for (const auto& result : results)
      EXPECT_NEAR(result.grad_norms.at(step), ref.grad_norms[step], 1e-5 * ref.grad_norms[step]) << "step " << step;
    EXPECT_NEAR(ref.torch_grad_norms[step], ref.grad_norms[step], 1e-4 * ref.grad_norms[step]) << "step " << step;
  }
  for (size_t step = 0; step < ref.step_losses.size(); ++step)
    std::printf("  %s step %zu: loss %.7f (one process %.7f), gradient norm %.7f (one process %.7f)\n", what.c_str(),
                step, mean_loss(step), ref.step_losses[step], results[0].grad_norms.at(step), ref.grad_norms[step]);
  for (const auto& result : results) {
    EXPECT_NEAR(result.valid_losses.at(0), ref.valid_loss, 2e-5 * ref.valid_loss);
    for (const auto& stage : result.data_parallel) {  // each stage this rank holds
      EXPECT_EQ(stage.strategy, "DDP");
      EXPECT_EQ(stage.ddp.synced_steps, o.loop.batches_per_epoch) << "one all-reduce round per step";
    }
    EXPECT_FALSE(result.data_parallel.empty());
    EXPECT_EQ(result.digest, results[0].digest) << "rank " << result.place.stage << "/" << result.place.replica;
  }

  test_support::Worst worst;
  size_t compared = 0;
  for (int s = 0; s < P; ++s) {
    for (const auto& [name, value] : at_place(0, s, 0, 0).final_state) {  // the unsplit stages' names, whatever T
      ASSERT_TRUE(ref.parameters.count(name)) << name;
      worst.add(value, ref.parameters.at(name));
      ++compared;
      // Replicas, context ranks and the tensor ranks' gathered stages stay bit-identical.
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < T; ++k)
          for (int c = 0; c < C; ++c) EXPECT_TRUE(at::equal(value, at_place(r, s, k, c).final_state.at(name))) << name;
    }
  }
  EXPECT_EQ(compared, ref.parameters.size()) << "the stages together hold every parameter once";
  EXPECT_LT(worst.value, 2e-5) << what << ": largest parameter difference from the one-process run";
  std::printf("  %s: %zu parameters, largest difference from one process %.3g\n", what.c_str(), compared,
              worst.value);
}

class LayoutEqualsOneProcess : public ::testing::TestWithParam<train::Layout> {};

TEST_P(LayoutEqualsOneProcess, LossesNormsAndParameters) {
  train::TrainerOptions o = tiny_options(GetParam().pipeline, GetParam().replicas);
  o.plan.layout.tensor = GetParam().tensor;
  o.plan.layout.context = GetParam().context;
  expect_equals_one_process(o);
}

INSTANTIATE_TEST_SUITE_P(Capstone, LayoutEqualsOneProcess,
                         ::testing::Values(train::Layout{2, 2}, train::Layout{2, 1}, train::Layout{1, 4},
                                           // The third dimension: each stage's layers cut across 2 tensor ranks.
                                           train::Layout{2, 2, 2}, train::Layout{1, 2, 2}, train::Layout{2, 1, 2},
                                           // The fourth: every sequence split over context ranks (ring, zigzag;
                                           // the 35 rows padded to 36 and 40), on 8 ranks.
                                           train::Layout{2, 1, 2, 2}, train::Layout{1, 2, 1, 4}),
                         [](const auto& info) {
                           const train::Layout& l = info.param;
                           return std::to_string(l.pipeline) + "x" + std::to_string(l.replicas) +
                                  (l.tensor > 1 ? "x" + std::to_string(l.tensor) : std::string()) +
                                  (l.context > 1 ? "_context" + std::to_string(l.context) : std::string());
                         });

// 4 experts, top-k, a capacity of 1.0 and both auxiliary losses (their
// coefficients ten times the defaults, so that they move the run).
void with_capacity_and_losses(train::TrainerOptions& o, int64_t top_k) {
  o.model.moe.experts = 4, o.model.moe.top_k = top_k, o.model.moe.capacity_factor = 1.0;
  o.model.moe.balance_coefficient = 0.1, o.model.moe.z_coefficient = 0.01;
}

// The model with experts (4 per layer, top-2) on 2 x 2, 2 x 1 and 1 x 4,
// every rank holding all of its stages' experts, or spread over expert
// groups of 2 or 4 replicas (expert parallelism: the all-to-alls, the
// experts' gradients summed over their copies); with 2 tensor ranks (each
// layer's experts whole on both, routing the same tokens) and 2 context
// ranks (each routing its own tokens), and spread over those: over 2
// replicas of a stage cut across 2 tensor ranks (each tensor rank its own
// expert groups), over 2 context ranks, over 2 replicas x 2 context ranks,
// and over 2 context ranks of 2 stages cut across 2 tensor ranks: dropless
// and without the auxiliary losses every token's output is its own (no
// capacity shared with other tokens, no loss over the batch), so the same
// equality holds.
class ExpertsEqualOneProcess : public ::testing::TestWithParam<std::pair<train::Layout, int>> {};

TEST_P(ExpertsEqualOneProcess, LossesNormsAndParameters) {
  const auto& [layout, N] = GetParam();
  train::TrainerOptions o = tiny_options(layout.pipeline, layout.replicas);
  o.plan.layout = layout;
  o.model.moe.experts = 4, o.model.moe.top_k = 2;
  o.model.moe.balance_coefficient = o.model.moe.z_coefficient = 0;
  o.plan.experts.parallel = N;
  expect_equals_one_process(o);
}

INSTANTIATE_TEST_SUITE_P(Capstone, ExpertsEqualOneProcess,
                         ::testing::Values(std::make_pair(train::Layout{2, 2}, 1), std::make_pair(train::Layout{2, 1}, 1),
                                           std::make_pair(train::Layout{1, 4}, 1), std::make_pair(train::Layout{2, 2}, 2),
                                           std::make_pair(train::Layout{1, 4}, 2), std::make_pair(train::Layout{1, 4}, 4),
                                           std::make_pair(train::Layout{1, 1, 2, 1}, 1),
                                           std::make_pair(train::Layout{2, 1, 1, 2}, 1),
                                           std::make_pair(train::Layout{1, 2, 2, 2}, 1),
                                           std::make_pair(train::Layout{1, 2, 2, 1}, 2),
                                           std::make_pair(train::Layout{1, 1, 1, 2}, 2),
                                           std::make_pair(train::Layout{1, 2, 1, 2}, 4),
                                           std::make_pair(train::Layout{2, 1, 2, 2}, 2)),
                         [](const auto& info) {
                           const train::Layout& l = info.param.first;
                           const int n = info.param.second;
                           return std::to_string(l.pipeline) + "x" + std::to_string(l.replicas) +
                                  (l.tensor > 1 ? "_tensor" + std::to_string(l.tensor) : std::string()) +
                                  (l.context > 1 ? "_context" + std::to_string(l.context) : std::string()) +
                                  (n > 1 ? "_expert_parallel" + std::to_string(n) : std::string());
                         });

// With a capacity and both auxiliary losses the experts' runs are no longer
// one process's (a capacity and the losses see a group of tokens), but the
// layouts that route the same tokens alike still agree: 2 tensor ranks
// (both route the whole batch) train what one rank trains, and 2 context
// ranks train alike whether their attention runs round the ring or by the
// naive all-gather of every key and value.
TEST(CapstoneExperts, WithCapacityAndAuxiliaryLossesTensorAndContextRanksMatchTheirNaiveLayouts) {
  train::TrainerOptions o = tiny_options(1, 1);
  with_capacity_and_losses(o, 2);
  const auto one = run_threads(o);
  o.plan.layout.tensor = 2;
  const auto tensor = run_threads(o);
  const double tensor_worst = tests::largest_state_difference(tensor.at(0).final_state, one.at(0).final_state);
  EXPECT_LT(tensor_worst, 2e-5);
  o.plan.layout.tensor = 1, o.plan.layout.context = 2;
  const auto ring = run_threads(o);
  o.plan.context.method = context_parallel::Method::kNaive;
  const auto naive = run_threads(o);
  const double context_worst = tests::largest_state_difference(ring.at(0).final_state, naive.at(0).final_state);
  EXPECT_LT(context_worst, 2e-5);
  // The capacity and the losses did change the run: 2 context ranks each
  // routing half the tokens do not train what one rank trains.
  EXPECT_GT(tests::largest_state_difference(ring.at(0).final_state, one.at(0).final_state), 1e-4);
  std::printf("  capacity 1.0, aux losses: 2 tensor ranks against 1, largest difference %.3g; 2 context ranks, ring "
              "against naive, %.3g\n",
              tensor_worst, context_worst);
}

// Expert parallelism against the naive layout beside it (every rank holding
// every expert, DDP averaging them), with a capacity and both auxiliary
// losses: each rank routes its own tokens either way, so the runs are one.
TEST(CapstoneExperts, ExpertParallelEqualsEveryExpertOnEveryRank) {
  train::TrainerOptions o = tiny_options(1, 4);
  with_capacity_and_losses(o, 2);
  const auto naive = run_threads(o);
  o.plan.experts.parallel = 2;
  const auto spread = run_threads(o);
  const double worst = tests::largest_state_difference(spread.at(0).final_state, naive.at(0).final_state);
  EXPECT_LT(worst, 2e-5);
  for (size_t k = 0; k < naive.at(0).step_losses.size(); ++k)
    EXPECT_NEAR(spread.at(0).step_losses.at(k), naive.at(0).step_losses[k], 2e-5 * naive.at(0).step_losses[k]);
  std::printf("  1 x 4, capacity 1.0, aux losses: expert parallel 2 against every expert on every rank: largest "
              "difference %.3g\n",
              worst);
}

// A checkpoint holds every expert whatever the expert-parallel size that
// wrote it: stopped after step 3 with the experts spread over 4 replicas,
// resumed with them spread over 2, it ends where the uninterrupted run on 2 ends.
TEST(CapstoneExperts, ResumesFromACheckpointOfAnotherExpertParallelSize) {
  const std::string dir = ::testing::TempDir() + "capstone_experts_resume_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::TrainerOptions o = tiny_options(1, 4);
  o.model.moe.experts = 4, o.model.moe.top_k = 2;
  o.plan.experts.parallel = 2;
  const auto uninterrupted = run_threads(o);
  train::TrainerOptions first = o;
  first.plan.experts.parallel = 4;
  first.checkpoints.dir = dir;
  first.checkpoints.every = 3;
  first.loop.stop_after_steps = 3;
  ASSERT_TRUE(run_threads(first).at(0).interrupted);
  train::TrainerOptions second = o;
  second.checkpoints.dir = dir;
  second.checkpoints.resume = true;
  const auto resumed = run_threads(second);
  EXPECT_EQ(resumed.at(0).resumed_from_step, 3);
  const double worst = tests::largest_state_difference(resumed.at(0).final_state, uninterrupted.at(0).final_state);
  EXPECT_LT(worst, 2e-5);
  std::printf("  experts spread over 4 replicas for 3 steps, then over 2: largest difference from the "
              "uninterrupted run %.3g\n",
              worst);
  std::filesystem::remove_all(dir);
}

// With a capacity and the auxiliary losses, routing depends on the
// microbatch: the pipeline on 2 x 1 runs the microbatches the trainer runs
// on one rank, and ends with its parameters; the losses are real (without
// them the run ends elsewhere).
TEST(CapstoneExperts, WithCapacityAndAuxiliaryLossesAPipelineEqualsOneRank) {
  train::TrainerOptions o = tiny_options(1, 1);
  with_capacity_and_losses(o, 1);
  const auto one = run_threads(o);
  o.plan.layout.pipeline = 2;
  const auto two = run_threads(o);
  std::map<std::string, at::Tensor> piped;
  for (const auto& r : two) piped.insert(r.final_state.begin(), r.final_state.end());
  ASSERT_EQ(piped.size(), one.at(0).final_state.size());
  const double worst = tests::largest_state_difference(piped, one.at(0).final_state);
  EXPECT_LT(worst, 2e-5);
  const std::vector<double>& losses = two.at(1).step_losses;
  ASSERT_EQ(losses.size(), one.at(0).step_losses.size());
  for (size_t k = 0; k < losses.size(); ++k) EXPECT_NEAR(losses[k], one.at(0).step_losses[k], 2e-5 * losses[k]);
  train::TrainerOptions without = o;
  without.model.moe.balance_coefficient = without.model.moe.z_coefficient = 0;
  const auto plain = run_threads(without);
  EXPECT_NE(plain.at(0).digest, two.at(0).digest) << "the auxiliary losses changed nothing";
  std::printf("  2 x 1 against 1 x 1 with capacity 1.0 and aux losses: largest difference %.3g; digest %s (no aux: %s)\n",
              worst, two.at(0).digest.c_str(), plain.at(0).digest.c_str());
}

// Every context-parallel method and layout the capstone takes, on 1 x 1
// with 2 context ranks (1 x 1 x 3 for the contiguous ring: the 35 rows
// padded to 36, 12 each): the same equality.
class ContextEqualsOneProcess
    : public ::testing::TestWithParam<std::tuple<context_parallel::Method, context_parallel::Layout, int>> {};

TEST_P(ContextEqualsOneProcess, LossesNormsAndParameters) {
  const auto [method, layout, C] = GetParam();
  train::TrainerOptions o = tiny_options(1, 1);
  o.plan.layout.context = C;
  o.plan.context.method = method;
  o.plan.context.layout = layout;
  expect_equals_one_process(o);
}

INSTANTIATE_TEST_SUITE_P(
    Capstone, ContextEqualsOneProcess,
    ::testing::Values(std::make_tuple(context_parallel::Method::kRing, context_parallel::Layout::kContiguous, 3),
                      std::make_tuple(context_parallel::Method::kAllGather, context_parallel::Layout::kZigzag, 2),
                      std::make_tuple(context_parallel::Method::kUlysses, context_parallel::Layout::kZigzag, 2),
                      std::make_tuple(context_parallel::Method::kNaive, context_parallel::Layout::kContiguous, 2)),
    [](const auto& info) {
      std::string method = context_parallel::to_string(std::get<0>(info.param));
      std::replace(method.begin(), method.end(), '-', '_');
      return method + "_" + context_parallel::to_string(std::get<1>(info.param)) + "_" +
             std::to_string(std::get<2>(info.param));
    });

// Ulysses inside a tensor group: the tiny model with 4 heads, 2 per tensor
// rank, 1 per context rank after the all-to-all (1 x 1 x 2 x 2), and
// context parallelism under a schedule that gives each rank two stages
// (2 x 1 x 1 x 2, Interleaved 1F1B, 4 layers): the same equality.
TEST(Capstone, UlyssesInsideATensorGroupEqualsOneProcess) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.model.heads = 4;
  o.plan.layout = {1, 1, 2, 2};
  o.plan.context.method = context_parallel::Method::kUlysses;
  expect_equals_one_process(o);
}

TEST(Capstone, ContextUnderInterleavedStagesEqualsOneProcess) {
  train::TrainerOptions o = tiny_options(2, 1);
  o.model.layers = 4;
  o.plan.layout.context = 2;
  o.plan.pipeline.schedule = pipeline::ScheduleKind::kInterleaved1F1B;
  o.plan.pipeline.stages_per_rank = 2;
  expect_equals_one_process(o);
}

// The tiny preset's 2 heads over 2 tensor ranks leave 1 head a tensor
// rank, which 2 context ranks cannot share out whole: refused, with the
// sizes that would do.
TEST(Capstone, UlyssesRefusesHeadsTheContextGroupCannotShare) {
  train::TrainerOptions o = tiny_options(1, 1);
  o.plan.layout = {1, 1, 2, 2};
  o.plan.context.method = context_parallel::Method::kUlysses;
  const std::vector<std::string> refusals = train::plan_for(o, 40).refusals();
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0],
            "Ulysses gives each context rank whole heads: 2 heads over 2 tensor ranks do not divide by 2 context "
            "ranks (context sizes that would: 1; or --context-method ring, which takes any)");
  o.model.heads = 4;
  EXPECT_TRUE(train::plan_for(o, 40).refusals().empty());
}

// Every schedule the library has, on 2 x 2 and on 4 x 1, the tiny model
// cut into 2 layers per pipeline rank (so that schedules holding 2 stages
// per rank get a layer each): the same equality. Interleaved and V
// schedules give each of a rank's stages its own DDP.
class ScheduleEqualsOneProcess : public ::testing::TestWithParam<std::tuple<pipeline::ScheduleKind, int>> {};

TEST_P(ScheduleEqualsOneProcess, LossesNormsAndParameters) {
  const auto [kind, P] = GetParam();
  train::TrainerOptions o = tiny_options(P, 4 / P);
  o.model.layers = 2 * P;
  o.plan.pipeline.schedule = kind;
  o.plan.pipeline.stages_per_rank = train::default_stages_per_rank(o.plan.pipeline.schedule);
  expect_equals_one_process(o);
}

INSTANTIATE_TEST_SUITE_P(Capstone, ScheduleEqualsOneProcess,
                         ::testing::Combine(::testing::ValuesIn(pipeline::all_kinds()), ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::string(pipeline::kind_name(std::get<0>(info.param))) + "_p" +
                                  std::to_string(std::get<1>(info.param));
                         });

// A checkpoint holds stages by their names, so a job may go on under a
// schedule that places them otherwise: stopped after step 3 under 1F1B
// (rank 0 held layers 0-1), resumed under Interleaved 1F1B (rank 0 holds
// layers 0 and 2: its part is re-cut from both), ending where the
// uninterrupted 1F1B run ends.
TEST(Capstone, CheckpointResumesUnderAScheduleThatPlacesStagesOtherwise) {
  const std::string dir = ::testing::TempDir() + "capstone_reschedule_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::TrainerOptions o = tiny_options(2, 2);
  o.model.layers = 4;
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 4;
  const auto uninterrupted = run_threads(o);
  o.checkpoints.dir = dir;
  o.checkpoints.every = 3;
  o.loop.stop_after_steps = 3;
  ASSERT_TRUE(run_threads(o).at(0).interrupted);
  o.loop.stop_after_steps = -1;
  o.checkpoints.resume = true;
  o.plan.pipeline.schedule = pipeline::ScheduleKind::kInterleaved1F1B;
  o.plan.pipeline.stages_per_rank = 2;
  const auto resumed = run_threads(o);
  test_support::Worst worst;
  for (size_t rank = 0; rank < resumed.size(); ++rank) {
    EXPECT_EQ(resumed[rank].resumed_from_step, 3) << "rank " << rank;
    EXPECT_EQ(resumed[rank].steps, 8);
    EXPECT_NEAR(resumed[rank].test_loss, uninterrupted[rank].test_loss, 2e-5 * uninterrupted[rank].test_loss);
    for (const auto& [name, value] : resumed[rank].final_state)  // each rank: its stages' names
      for (const auto& other : uninterrupted)
        if (other.place.replica == 0 && other.final_state.count(name))
          worst.add(value, other.final_state.at(name));
  }
  EXPECT_LT(worst.value, 2e-5);
  std::printf("  1F1B for 3 steps, Interleaved 1F1B for 5: largest difference from the uninterrupted run %.3g\n",
              worst.value);
  std::filesystem::remove_all(dir);
}

// A corpus with structure a model can learn fast: lines of 10 consecutive
// words of a 30-word cycle from a random start ("w7 w8 ... w16"), so the
// next word follows from the current one except across line ends. Its
// unigram baseline is about log(30) = 3.4 nats; a model that learned the
// cycle gets near 0.3.
std::string write_cycle_corpus() {
  const std::string dir = ::testing::TempDir() + "capstone_cycle_corpus_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::mt19937 random(7);
  for (const auto& [split, lines] : {std::pair<std::string, int>{"train", 3000}, {"valid", 400}, {"test", 400}}) {
    std::ofstream out(dir + "/wiki." + split + ".tokens");
    for (int line = 0; line < lines; ++line) {
      const int start = static_cast<int>(random() % 30);
      for (int k = 0; k < 10; ++k) out << " w" << (start + k) % 30;
      out << " \n";
    }
  }
  return dir;
}

// A short 2 x 2 run ends well below the unigram baseline computed from its
// corpus (data::summarize, not a number written here): it learned context.
TEST(Capstone, ValidationLossEndsWellBelowUnigramBaseline) {
  const std::string dir = write_cycle_corpus();
  const data::Corpus corpus = data::load_corpus(dir);
  std::filesystem::remove_all(dir);
  train::TrainerOptions o = tiny_options(2, 2);
  o.model.dropout = -1;  // the tutorial's 0.2
  o.loop.keep_final_state = false;
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 20;
  o.loop.eval_batches = 10;
  const double baseline = data::summarize(corpus).valid_unigram_loss;
  const auto results = run_threads(o, corpus);
  std::printf("  valid losses %.3f, %.3f; unigram baseline %.3f nats\n", results[0].valid_losses.at(0),
              results[0].valid_losses.at(1), baseline);
  EXPECT_LT(results[0].best_valid_loss, 0.5 * baseline);
  for (const auto& result : results) EXPECT_EQ(result.best_valid_loss, results[0].best_valid_loss);
}

// Stopped after 3 steps (a checkpoint every 3), then resumed: the same final
// parameters, bit for bit, as a run never interrupted.
TEST(Capstone, ResumedRunEndsWithTheUninterruptedDigest) {
  const std::string dir = ::testing::TempDir() + "capstone_resume_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  train::TrainerOptions o = tiny_options(2, 2);
  o.loop.epochs = 2;
  o.loop.batches_per_epoch = 4;
  const auto uninterrupted = run_threads(o);

  const auto [first, resumed] = tests::stop_and_resume(o, dir, 3);
  EXPECT_NE(first[0].digest, uninterrupted[0].digest);
  for (size_t rank = 0; rank < resumed.size(); ++rank) {
    EXPECT_EQ(resumed[rank].steps, 8);
    EXPECT_EQ(resumed[rank].digest, uninterrupted[rank].digest) << "rank " << rank;
    EXPECT_EQ(resumed[rank].test_loss, uninterrupted[rank].test_loss);
  }
  std::printf("  digest %s uninterrupted, %s after the stop, %s resumed\n", uninterrupted[0].digest.c_str(),
              first[0].digest.c_str(), resumed[0].digest.c_str());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace distlab
