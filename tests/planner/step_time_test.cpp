// Step-time prediction against its parts run directly: a collective against
// the cost model (collectives/cost_model.hpp) on the ring's plan, a
// pipeline against the simulator (pipeline/simulator.hpp) given the same
// per-action seconds, and ranks that outnumber the cores against the
// sharing written out here.
#include <gtest/gtest.h>

#include <algorithm>

#include "collectives/cost_model.hpp"
#include "pipeline/simulator.hpp"
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
  EXPECT_DOUBLE_EQ(shared.critical_s, own.critical_s);
  EXPECT_NEAR(shared.packed_s, 4.3 * own.packed_s, 1e-12 * shared.packed_s);
  EXPECT_DOUBLE_EQ(shared.step_s, std::max(shared.critical_s, shared.packed_s));
  EXPECT_GT(shared.step_s, 2 * own.step_s);
  // The bubble is the schedule's either way: on shared cores it costs less than it says.
  EXPECT_DOUBLE_EQ(shared.bubble, own.bubble);
}

}  // namespace
}  // namespace distlab::planner
