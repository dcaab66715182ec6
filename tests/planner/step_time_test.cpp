// Step-time prediction against its parts run directly: a collective against
// the cost model (collectives/cost_model.hpp) on the ring's plan, a
// pipeline against the simulator (pipeline/simulator.hpp) given the same
// per-action seconds, and ranks that outnumber the cores against the
// sharing written out here.
#include <gtest/gtest.h>

#include <algorithm>

#include "collectives/cost_model.hpp"
#include "pipeline/simulator.hpp"
#include "planner/pieces.hpp"
#include "planner/step_time.hpp"

namespace distlab::planner {
namespace {

Profile hand_profile(int cores) {
  Profile p;
  p.cores = cores;
  p.matmul = {{35, 128, 384, "fp32", 2e9}, {350, 128, 384, "fp32", 6e9}};
  p.elementwise_bytes_per_second = 5e9;
  p.op_seconds = 4e-6;
  p.links = {{"threads", "p2p", 2, {2e-5, 2e-10}}};
  // Measured on 2 cores: 8 busy ranks each 4.3 times slower than one alone.
  if (cores == 2) p.sharing = {{1, 1.0}, {2, 1.0}, {4, 2.1}, {8, 4.3}};
  else p.sharing = {{1, 1.0}, {8, 1.0}};
  return p;
}

TEST(StepTime, ACollectiveIsTheCostModelsRingOverTheLink) {
  const Profile p = hand_profile(8);
  for (const int ranks : {2, 3, 4, 8})
    for (const int64_t bytes : {int64_t(4), int64_t(4096), int64_t(4 << 20)}) {
      const collectives::Plan plan =
          collectives::make_plan(collectives::Collective::kAllReduce, collectives::Algorithm::kRing, ranks, bytes / 4);
      const double expected = collectives::predict(plan, p.links[0].link).total_seconds;
      EXPECT_DOUBLE_EQ(collective_seconds(p, "threads", collectives::Collective::kAllReduce, ranks, bytes), expected)
          << ranks << " ranks, " << bytes << " bytes";
    }
  // A measured all-reduce of that group size is taken as it is.
  Profile q = p;
  q.links.push_back({"threads", "all_reduce", 4, {1e-4, 1e-9}});
  EXPECT_DOUBLE_EQ(collective_seconds(q, "threads", collectives::Collective::kAllReduce, 4, 1000), 1e-4 + 1000 * 1e-9);
  EXPECT_EQ(collective_seconds(q, "threads", collectives::Collective::kAllReduce, 1, 1000), 0);
}

TEST(StepTime, APipelineIsTheSimulatorsMakespanWithTheStagesSeconds) {
  const Profile p = hand_profile(8);  // 8 cores: 4 ranks, no sharing
  const ModelShape model = model_shape("cpu", 1000);
  for (const pipeline::ScheduleKind kind : {pipeline::ScheduleKind::kGPipe, pipeline::ScheduleKind::k1F1B,
                                            pipeline::ScheduleKind::kInterleaved1F1B}) {
    Choice c;
    c.layout = train::Layout{2, 1, 1, 1};
    c.pipeline.schedule = kind;
    c.pipeline.stages_per_rank = kind == pipeline::ScheduleKind::kInterleaved1F1B ? 2 : 1;
    c.pipeline.microbatches = 4;
    const int stages = 2 * c.pipeline.stages_per_rank;
    pipeline::ActionCosts costs;
    for (int s = 0; s < stages; ++s) {
      const StageSeconds sec = stage_seconds(model, c, p, "threads", s, microbatch_columns(model, 1, 4));
      costs.per_stage.push_back({sec.forward, sec.backward, sec.backward / 2, sec.backward / 2});
    }
    const int64_t message_bytes = model.bptt * 5 * model.lm.emsize * 4;  // 20 columns / 4 microbatches
    costs.message_s = p.links[0].link.alpha_s + double(message_bytes) * p.links[0].link.beta_s_per_byte;
    const pipeline::Simulation sim =
        pipeline::simulate(pipeline::make_schedule(kind, 2, 4, c.pipeline.stages_per_rank), costs);
    const StepPrediction prediction = predict_time(model, c, p);
    EXPECT_DOUBLE_EQ(prediction.pipeline_s, sim.makespan) << pipeline::kind_name(kind);
    EXPECT_DOUBLE_EQ(prediction.bubble, sim.bubble) << pipeline::kind_name(kind);
    EXPECT_GT(prediction.critical_s, sim.makespan);  // the optimizer and the norm come after
    EXPECT_DOUBLE_EQ(prediction.step_s, prediction.critical_s) << "2 ranks on 8 cores: nothing shared";
  }
}

TEST(StepTime, RanksThatOutnumberTheCoresShareThem) {
  const ModelShape model = model_shape("cpu", 1000);
  {
    // 8 replicas of one stage: every rank busy all the time, each 4.3
    // times slower than alone.
    Choice c;
    c.layout = train::Layout{1, 8, 1, 1};
    const StepPrediction own = predict_time(model, c, hand_profile(8));
    const StepPrediction shared = predict_time(model, c, hand_profile(2));
    EXPECT_DOUBLE_EQ(own.step_s, own.pipeline_s + own.after_s);
    EXPECT_NEAR(shared.step_s - shared.after_s, 4.3 * own.pipeline_s, 1e-12);
    const double clip = 2 * 2e-5 * 3;  // the norm's scalar all-reduce over 8: 3 steps of 2 alpha, not slowed
    EXPECT_NEAR(shared.after_s - clip, 4.3 * (own.after_s - clip), 1e-12);
  }
  {
    // 2 stages x 4 replicas, one microbatch: F0 F1 B1 B0 one after the
    // other in each pipeline, so 4 ranks are busy at any time (2.1 times
    // slower each); the two messages between are not slowed.
    Choice c;
    c.layout = train::Layout{2, 4, 1, 1};
    c.pipeline.schedule = pipeline::ScheduleKind::kGPipe;
    c.pipeline.microbatches = 1;
    const Profile p = hand_profile(2);
    const StepPrediction own = predict_time(model, c, hand_profile(8));
    const StepPrediction shared = predict_time(model, c, p);
    const int64_t columns = microbatch_columns(model, 4, 1);
    const double message = 2e-5 + double(model.bptt * columns * model.lm.emsize * 4) * 2e-10;
    double compute = 0;
    for (int s = 0; s < 2; ++s) {
      const StageSeconds sec = stage_seconds(model, c, p, "threads", s, columns);
      compute += sec.forward + sec.backward;
    }
    EXPECT_NEAR(own.pipeline_s, compute + 2 * message, 1e-12);
    EXPECT_NEAR(shared.step_s - shared.after_s, 2.1 * compute + 2 * message, 1e-12);
    EXPECT_GT(shared.step_s, 2 * own.step_s);
    // The bubble is the schedule's on ranks of their own: on shared cores it costs less than it says.
    EXPECT_DOUBLE_EQ(shared.bubble, own.bubble);
  }
}

TEST(StepTime, AGpuProfilesRanksTalkThroughNccl) {
  Profile p = hand_profile(8);
  p.device = "cuda";
  p.cores = 4;
  p.links = {{"nccl", "p2p", 2, {1e-5, 2e-12}}};
  EXPECT_EQ(ranks_backend(p), "nccl");
  EXPECT_EQ(ranks_backend(hand_profile(8)), "threads");
  Choice c;
  c.layout = train::Layout{2, 2, 1, 1};
  const ModelShape model = model_shape("cpu", 1000);
  const StepPrediction nccl = predict_time(model, c, p);
  EXPECT_GT(nccl.step_s, nccl.pipeline_s);
  // The profile has no thread ranks' link: asked for them, it says so.
  EXPECT_THROW(predict_time(model, c, p, "threads"), ProfileError);
  // Each rank its own GPU: nothing shared, and MFU over the 4 devices.
  EXPECT_DOUBLE_EQ(nccl.step_s, nccl.critical_s);
  EXPECT_NEAR(nccl.mfu, nccl.model_flops / nccl.step_s / (6e9 * 4), 1e-12);
}

// A profile with the model's pieces measured (pieces.hpp), by hand: a
// layer (kept and recomputed whole), the embedding and the decoder at 175
// and 700 tokens on one thread; the backward also split into I and W where
// the executor can split it (not the layer recomputed whole).
Profile pieces_profile() {
  Profile p = hand_profile(2);
  p.pieces_model = pieces_model(model_shape("cpu", 1000));
  p.pieces.push_back({"layer", "fp32", "none", 1, 175, 2e-3, 3e-3, 1e-3, 2.5e-3});
  p.pieces.push_back({"layer", "fp32", "none", 1, 700, 7e-3, 9e-3, 4e-3, 7e-3});
  p.pieces.push_back({"layer", "fp32", "full", 1, 175, 2e-3, 4.5e-3});
  p.pieces.push_back({"layer", "fp32", "full", 1, 700, 7e-3, 13.5e-3});
  p.pieces.push_back({"embedding", "fp32", "none", 1, 175, 3e-4, 1e-4, 0, 1e-4});
  p.pieces.push_back({"embedding", "fp32", "none", 1, 700, 9e-4, 3e-4, 0, 3e-4});
  p.pieces.push_back({"decoder", "fp32", "none", 1, 175, 4e-3, 1e-2, 3e-3, 8e-3});
  p.pieces.push_back({"decoder", "fp32", "none", 1, 700, 1.5e-2, 4e-2, 1.1e-2, 3.2e-2});
  return p;
}

TEST(StepTime, AStagesSecondsAreItsMeasuredPiecesAtTheRanksTokens) {
  const Profile p = pieces_profile();
  const ModelShape model = model_shape("cpu", 1000);  // 4 layers, 20 columns of 35 tokens
  Choice c;
  c.layout = train::Layout{2, 1, 1, 1};
  c.pipeline.microbatches = 2;  // 10 columns: 350 tokens a microbatch
  // 350 tokens: (350 - 175) / (700 - 175) = 1/3 of the way from 175 to 700.
  auto at350 = [](double y175, double y700) { return y175 + (y700 - y175) / 3; };
  const StageSeconds first = stage_seconds(model, c, p, "threads", 0, 10);
  const StageSeconds last = stage_seconds(model, c, p, "threads", 1, 10);
  EXPECT_NEAR(first.forward, 2 * at350(2e-3, 7e-3) + at350(3e-4, 9e-4), 1e-15);
  EXPECT_NEAR(first.backward, 2 * at350(3e-3, 9e-3) + at350(1e-4, 3e-4), 1e-15);
  EXPECT_NEAR(last.forward, 2 * at350(2e-3, 7e-3) + at350(4e-3, 1.5e-2), 1e-15);
  EXPECT_NEAR(last.backward, 2 * at350(3e-3, 9e-3) + at350(1e-2, 4e-2), 1e-15);
  // The backward split as zero-bubble schedules run it: the first stage
  // returns no gradient (I empty); the last one its pieces' measured I; W
  // is autograd's backward to the parameters, which walks the whole stage
  // again (every node between the loss and a parameter): the whole
  // backward, not the pieces' W added up (each walks only its own layer).
  EXPECT_EQ(first.backward_input, 0);
  EXPECT_DOUBLE_EQ(first.backward_weight, 2 * at350(3e-3, 9e-3) + at350(1e-4, 3e-4));
  EXPECT_NEAR(last.backward_input, 2 * at350(1e-3, 4e-3) + at350(3e-3, 1.1e-2), 1e-15);
  EXPECT_NEAR(last.backward_weight, 2 * at350(3e-3, 9e-3) + at350(1e-2, 4e-2), 1e-15);

  // Recomputed whole: the measured recomputing layer; a zero-bubble
  // schedule cannot split its backward (its parameters' gradients come
  // with its input's), so its simulated W is empty and B the whole backward.
  c.memory.recompute = memory::Recompute::kFull;
  c.pipeline.schedule = pipeline::ScheduleKind::kZeroBubbleH1;
  const StageSeconds recomputed = stage_seconds(model, c, p, "threads", 0, 10);
  EXPECT_NEAR(recomputed.backward, 2 * at350(4.5e-3, 13.5e-3) + at350(1e-4, 3e-4), 1e-15);
  pipeline::ActionCosts costs;
  for (int s = 0; s < 2; ++s) {
    const StageSeconds sec = stage_seconds(model, c, p, "threads", s, 10);
    costs.per_stage.push_back({sec.forward, sec.backward, sec.backward, 0});
  }
  costs.message_s = p.links[0].link.alpha_s + double(35 * 10 * model.lm.emsize * 4) * p.links[0].link.beta_s_per_byte;
  const pipeline::Simulation sim = pipeline::simulate(pipeline::make_schedule(c.pipeline.schedule, 2, 2, 1), costs);
  const StepPrediction prediction = predict_time(model, c, p);
  EXPECT_DOUBLE_EQ(prediction.pipeline_s, sim.makespan);
  EXPECT_DOUBLE_EQ(prediction.bubble, sim.bubble);

  // 20 columns in 8 microbatches (tensor_split: four of 3, four of 2):
  // every action, I and W too, as the mean microbatch of 2.5 columns,
  // halfway between the stage's seconds at 2 and at 3.
  c.memory.recompute = memory::Recompute::kNone;
  c.pipeline.microbatches = 8;
  pipeline::ActionCosts uneven;
  for (int s = 0; s < 2; ++s) {
    const StageSeconds two = stage_seconds(model, c, p, "threads", s, 2);
    const StageSeconds three = stage_seconds(model, c, p, "threads", s, 3);
    auto mean = [](double a, double b) { return (a + b) / 2; };
    uneven.per_stage.push_back({mean(two.forward, three.forward), mean(two.backward, three.backward),
                                mean(two.backward_input, three.backward_input),
                                mean(two.backward_weight, three.backward_weight)});
  }
  EXPECT_GT(uneven.per_stage[1].backward_input, 0);
  uneven.message_s =
      p.links[0].link.alpha_s + double(35 * 20 * model.lm.emsize * 4) / 8 * p.links[0].link.beta_s_per_byte;
  const pipeline::Simulation uneven_sim = pipeline::simulate(pipeline::make_schedule(c.pipeline.schedule, 2, 8, 1), uneven);
  EXPECT_NEAR(predict_time(model, c, p).pipeline_s, uneven_sim.makespan, 1e-12);

  // A policy or a precision the profile did not measure: added up from the products.
  c.memory.recompute = memory::Recompute::kSelective;
  EXPECT_NO_THROW(stage_seconds(model, c, p, "threads", 0, 10));
  c.memory.recompute = memory::Recompute::kNone;
  EXPECT_TRUE(uses_pieces(p, model, c));
  c.memory.precision = memory::Precision::kBf16;
  EXPECT_FALSE(uses_pieces(p, model, c));
  Profile q = p;
  q.matmul.push_back({35, 128, 384, "bf16", 4e9});
  EXPECT_NO_THROW(stage_seconds(model, c, q, "threads", 0, 10));
  // Pieces of another model (the tiny preset's sizes differ) are not used for this one.
  c.memory.precision = memory::Precision::kFp32;
  q.pieces_model = pieces_model(model_shape("tiny", 1000));
  EXPECT_FALSE(uses_pieces(q, model, c));
  EXPECT_NE(stage_seconds(model, c, q, "threads", 0, 10).forward, first.forward);
}

// A layer cut over 2 tensor ranks (or 2 context ranks) measured as 2
// copies among 4 thread ranks: a rank's seconds there, the 4 ranks' sharing
// of the 2 cores (2.1 times slower each) in them.
TEST(StepTime, ACutLayerIsItsMeasuredSecondsWithTheSharingTakenOut) {
  Profile p = pieces_profile();
  for (const Cut cut : {Cut{2, 1}, Cut{1, 2}})
    for (const auto& [tokens, forward] : {std::pair<int64_t, double>{175, 5e-3}, {700, 11e-3}}) {
      PiecePoint q{"layer", "fp32", "none", 1, tokens, forward, 2 * forward, forward, 1.5 * forward};
      q.tensor = cut.tensor;
      q.context = cut.context;
      q.world = 4;
      p.pieces.push_back(q);
    }
  const ModelShape model = model_shape("cpu", 1000);
  auto at350 = [](double y175, double y700) { return y175 + (y700 - y175) / 3; };
  Choice c;
  c.layout = train::Layout{2, 1, 2, 1};  // 4 ranks: 2 stages of 2 tensor ranks (P, R, T, C)
  c.pipeline.microbatches = 2;           // 10 columns: 350 tokens a microbatch on every tensor rank
  const StageSeconds first = stage_seconds(model, c, p, "threads", 0, 10);
  const StageSeconds last = stage_seconds(model, c, p, "threads", 1, 10);
  // One thread a rank (4 ranks, 2 cores): the whole layer's seconds cancel
  // out of the ratio, and what is left is the cut layer's own, / 2.1.
  EXPECT_NEAR(first.forward, 2 * at350(5e-3, 11e-3) / 2.1 + at350(3e-4, 9e-4), 1e-15);
  EXPECT_NEAR(first.backward, 2 * at350(10e-3, 22e-3) / 2.1 + at350(1e-4, 3e-4), 1e-15);
  EXPECT_NEAR(last.backward_input, 2 * at350(5e-3, 11e-3) / 2.1 + at350(3e-3, 1.1e-2), 1e-15);
  EXPECT_NEAR(last.backward_weight, 2 * at350(10e-3, 22e-3) / 2.1 + at350(1e-2, 4e-2), 1e-15);  // the whole backward
  // 2 context ranks hold 18 of each column's 35 tokens (padded to 4 chunks
  // of 9): 180 tokens, 5/525 of the way from 175 to 700.
  c.layout = train::Layout{2, 1, 1, 2};
  auto at180 = [](double y175, double y700) { return y175 + (y700 - y175) * 5 / 525; };
  EXPECT_NEAR(stage_seconds(model, c, p, "threads", 0, 10).forward,
              2 * at180(5e-3, 11e-3) / 2.1 + at180(3e-4, 9e-4), 1e-15);
  // A cut the profile did not measure (4 tensor ranks): added up, not these.
  c.layout = train::Layout{1, 1, 4, 1};
  EXPECT_NO_THROW(stage_seconds(model, c, p, "threads", 0, 10));
  EXPECT_GT(stage_seconds(model, c, p, "threads", 0, 10).forward, 0);
}

}  // namespace
}  // namespace distlab::planner
