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
  Choice c;
  c.layout = train::Layout{2, 4, 1, 1};  // 8 ranks
  c.pipeline.microbatches = 4;
  const StepPrediction own = predict_time(model, c, hand_profile(8));
  const StepPrediction shared = predict_time(model, c, hand_profile(2));
  EXPECT_DOUBLE_EQ(own.step_s, own.critical_s);
  // On 2 cores each of 8 busy ranks runs 4.3 times slower: the pipeline's
  // mean work (its busy seconds and what follows the backward) x 4.3.
  EXPECT_NEAR(shared.packed_s, 4.3 * own.packed_s, 1e-12 * shared.packed_s);
  // The critical path: the schedule's actions slowed as much as the ranks
  // busy on average (8 x (1 - bubble)) share the 2 cores (the measured
  // points joined by straight lines), what follows the backward as all 8
  // do; the norm's two scalar all-reduces (over 2 stages, 4 replicas: 1 + 2
  // steps of 2 alpha) are not slowed.
  auto slowdown = [](double ranks) {  // hand_profile(2)'s points: 2 -> 1, 4 -> 2.1, 8 -> 4.3
    return ranks <= 2 ? 1.0 : ranks <= 4 ? 1.0 + (ranks - 2) / 2 * 1.1 : 2.1 + (ranks - 4) / 4 * 2.2;
  };
  const double clip = 2 * 2e-5 * (1 + 2);
  EXPECT_DOUBLE_EQ(shared.pipeline_s, own.pipeline_s);
  EXPECT_NEAR(shared.after_s - clip, 4.3 * (own.after_s - clip), 1e-12);
  EXPECT_NEAR(shared.critical_s, own.pipeline_s * slowdown(8 * (1 - own.bubble)) + shared.after_s, 1e-12);
  EXPECT_DOUBLE_EQ(own.critical_s, own.pipeline_s + own.after_s);
  EXPECT_DOUBLE_EQ(shared.step_s, std::max(shared.critical_s, shared.packed_s));
  EXPECT_GT(shared.step_s, 2 * own.step_s);
  // The bubble is the schedule's either way: on shared cores it costs less than it says.
  EXPECT_DOUBLE_EQ(shared.bubble, own.bubble);
}

// A profile with the model's pieces measured (pieces.hpp), by hand: a
// layer (kept and recomputed whole), the embedding and the decoder at 175
// and 700 tokens on one thread.
Profile pieces_profile() {
  Profile p = hand_profile(2);
  p.pieces_model = pieces_model(model_shape("cpu", 1000));
  for (const char* recompute : {"none", "full"}) {
    const double again = std::string(recompute) == "full" ? 1.5 : 1.0;
    p.pieces.push_back({"layer", "fp32", recompute, 1, 175, 2e-3, 3e-3 * again});
    p.pieces.push_back({"layer", "fp32", recompute, 1, 700, 7e-3, 9e-3 * again});
  }
  p.pieces.push_back({"embedding", "fp32", "none", 1, 175, 3e-4, 1e-4});
  p.pieces.push_back({"embedding", "fp32", "none", 1, 700, 9e-4, 3e-4});
  p.pieces.push_back({"decoder", "fp32", "none", 1, 175, 4e-3, 1e-2});
  p.pieces.push_back({"decoder", "fp32", "none", 1, 700, 1.5e-2, 4e-2});
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

}  // namespace
}  // namespace distlab::planner
