// The parallel plan (train/plan.hpp): every refusal with its reason, each
// from the one function that holds the rules; the stages each pipeline rank
// holds, against the schedule's own placement; the groups it describes,
// against the ranks place_of puts on each axis; rank <-> place both ways.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"
#include "train/plan.hpp"

namespace distlab::train {
namespace {

using pipeline::ScheduleKind;

// What a test asks the plan: its options and the model it is for.
struct Asked {
  PlanOptions plan;
  ModelFacts model;
};

ParallelPlan plan_of(const Asked& a) { return ParallelPlan(a.plan, a.model); }

Asked two_by_two() {
  Asked o;
  o.plan.layout = Layout{2, 2, 1};
  o.model.layers = 4;
  o.model.batch_size = 20;
  o.plan.pipeline.microbatches = 4;
  return o;
}

// Four pipeline ranks, eight layers, eight microbatches: every schedule
// builds, with one or two stages per rank.
Asked four_stages(ScheduleKind kind) {
  Asked o = two_by_two();
  o.plan.layout = Layout{4, 1, 1};
  o.model.layers = 8;
  o.plan.pipeline.microbatches = 8;
  o.plan.pipeline.schedule = kind;
  o.plan.pipeline.stages_per_rank = pipeline::stages_per_rank_for(kind, 2);
  return o;
}

// The plan's one refusal, which must contain `words`.
void expect_refused(const Asked& o, const std::string& words) {
  const ParallelPlan plan = plan_of(o);
  const std::vector<std::string> refused = plan.refusals();
  ASSERT_EQ(refused.size(), 1u) << (refused.empty() ? "none" : refused.front());
  EXPECT_NE(refused.front().find(words), std::string::npos) << refused.front();
  EXPECT_ANY_THROW(plan.check());
}

TEST(Plan, AGoodPlanHasNoRefusal) {
  const ParallelPlan plan = plan_of(two_by_two());
  EXPECT_TRUE(plan.refusals().empty());
  EXPECT_NO_THROW(plan.check());
  EXPECT_EQ(plan.strategy(), "DDP");
  // ZeRO composes with the other dimensions: a cut stage, two stages per rank.
  Asked all = two_by_two();
  all.plan.data.zero = 3;
  all.plan.layout.tensor = 2;
  all.plan.pipeline.schedule = ScheduleKind::kInterleaved1F1B;
  all.plan.pipeline.stages_per_rank = 2;
  all.model.layers = 4;
  const ParallelPlan composed = plan_of(all);
  EXPECT_TRUE(composed.refusals().empty()) << composed.refusals().front();
  EXPECT_EQ(composed.strategy(), "ZeRO-3");
}

TEST(Plan, EachRuleRefusesWithItsReason) {
  Asked o = two_by_two();
  o.plan.layout.tensor = 0;
  expect_refused(o, "the tensor dimension has size 0");
  o = two_by_two();
  o.plan.data.zero = 4;
  expect_refused(o, "--zero 4: expected 0 (DDP), 1");
  o = two_by_two();
  o.plan.pipeline.stages_per_rank = 0;
  expect_refused(o, "--stages-per-rank 0: at least 1");
  o = two_by_two();
  o.plan.pipeline.stages_per_rank = 2;
  o.plan.pipeline.schedule = ScheduleKind::kInterleaved1F1B;
  o.model.layers = 2;
  expect_refused(o, "2 pipeline ranks x 2 stages per rank need 4 layers, the model has 2: use --layers 4");
  o = two_by_two();
  o.plan.layout.pipeline = 4;
  o.plan.layout.replicas = 1;
  o.model.layers = 2;
  expect_refused(o, "4 pipeline stages need 4 layers, the model has 2");
  o = two_by_two();
  o.model.batch_size = 1;
  expect_refused(o, "batch 1 cannot be split among 2 replicas");
}

// Activation recomputation joins every dimension: full and selective with
// data, pipeline, tensor, context and expert ranks and every ZeRO stage;
// matmuls (the whole layer's products kept) refuses the cut layers and the
// experts, naming why.
TEST(Plan, RecomputationJoinsEveryDimensionAndMatmulsRefusesCutLayersAndExperts) {
  using memory::Recompute;
  for (const Recompute policy : {Recompute::kFull, Recompute::kSelective})
    for (int zero : {0, 1, 2, 3}) {
      Asked o = two_by_two();
      o.plan.memory.recompute = policy, o.plan.data.zero = zero;
      EXPECT_TRUE(plan_of(o).refusals().empty()) << memory::to_string(policy) << " --zero " << zero;
      o.plan.data.zero = 0;
      o.plan.layout.tensor = 2, o.plan.layout.context = 2;
      EXPECT_TRUE(plan_of(o).refusals().empty()) << memory::to_string(policy) << " tensor and context";
      o.plan.layout.tensor = 1, o.plan.layout.context = 1;
      o.model.moe.experts = 4, o.model.moe.top_k = 2, o.plan.experts.parallel = 2;
      EXPECT_TRUE(plan_of(o).refusals().empty()) << memory::to_string(policy) << " experts";
    }
  Asked o = two_by_two();
  o.plan.memory.recompute = Recompute::kFull;
  EXPECT_EQ(plan_of(o).describe().back(),
            "activations: every layer recomputed in its backward (--recompute full), only its input kept");
  o.plan.layout.tensor = 2;
  EXPECT_EQ(plan_of(o).describe().back(),
            "activations: the recomputation runs the layer's collectives again, every rank of the group in the same "
            "order");
  o = two_by_two();
  o.plan.memory.recompute = Recompute::kSelective;
  const std::string selective =
      "activations: each layer's attention core recomputed in its backward (--recompute selective), the s x s scores "
      "and weights not kept";
  EXPECT_EQ(plan_of(o).describe().back(), selective);
  o.plan.layout.tensor = 2;  // the core of a tensor rank's heads exchanges nothing
  EXPECT_EQ(plan_of(o).describe().back(), selective);
  o.plan.layout.context = 2;
  EXPECT_EQ(plan_of(o).describe().back(),
            "activations: the recomputation runs the attention core's exchanges again, every rank of the group in the "
            "same order");
  o = two_by_two();
  o.plan.memory.recompute = Recompute::kMatmuls;
  o.plan.data.zero = 3;
  EXPECT_EQ(plan_of(o).describe().back(),
            "activations: each layer recomputed in its backward but its matrix products (--recompute matmuls), their "
            "outputs kept");
  o.plan.data.zero = 0;
  o.plan.layout.context = 2;
  expect_refused(o, "--recompute matmuls with --tensor 1 --context 2: it keeps the products of the whole layer");
  o.plan.layout.context = 1;
  o.model.moe.experts = 4, o.model.moe.top_k = 2;
  expect_refused(o, "--recompute matmuls with --experts: the experts' products are dispatched apart");
}

TEST(Plan, PrecisionAndLossScalingAreDescribedAndAnInjectedOverflowNeedsTheScaler) {
  Asked o = two_by_two();
  o.plan.memory.precision = memory::Precision::kBf16;
  o.plan.memory.loss_scaling = true;
  o.plan.memory.inject_overflow_at_step = 3;
  EXPECT_TRUE(plan_of(o).refusals().empty());
  const std::vector<std::string> lines = plan_of(o).describe();
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[lines.size() - 2], "precision: matrix products in bf16 (--precision), norms and the loss in fp32; "
                                     "fp32 parameters, gradients and optimizer");
  EXPECT_NE(lines.back().find("loss scaling: dynamic"), std::string::npos) << lines.back();
  o.plan.memory.loss_scaling = false;
  expect_refused(o, "--inject-overflow-at-step 3 without a loss scaler would step every parameter to NaN");
}

// Which layouts thread ranks sharing a GPU may run (comm/backward_thread.hpp),
// by hand: those whose ranks wait for each other only after the backward.
TEST(Plan, ThreadRanksSharingAGpuRunOnlyWhatWaitsAfterTheBackward) {
  struct Case {
    const char* name;
    std::function<void(Asked&)> set;
    bool runs;
  };
  const std::vector<Case> cases = {
      {"2x2 DDP", [](Asked&) {}, true},
      {"2x2 ZeRO-1", [](Asked& o) { o.plan.data.zero = 1; }, true},
      {"2x2 ZeRO-2", [](Asked& o) { o.plan.data.zero = 2; }, true},
      {"2x2 ZeRO-3", [](Asked& o) { o.plan.data.zero = 3; }, false},
      {"4x1 interleaved", [](Asked& o) { o = four_stages(ScheduleKind::kInterleaved1F1B); }, true},
      {"2x2x2 tensor", [](Asked& o) { o.plan.layout.tensor = 2; }, false},
      {"1x2 x 2 context", [](Asked& o) { o.plan.layout = Layout{1, 2, 1}, o.plan.layout.context = 2; }, false},
      {"2x2 experts over 2", [](Asked& o) { o.model.moe.experts = 4, o.plan.experts.parallel = 2; }, false},
      {"2x2 experts on each rank", [](Asked& o) { o.model.moe.experts = 4; }, true},
  };
  for (const Case& c : cases) {
    Asked o = two_by_two();
    c.set(o);
    const std::string refusal = plan_of(o).refusal_on_a_shared_engine_thread();
    EXPECT_EQ(refusal.empty(), c.runs) << c.name << ": " << refusal;
    if (!c.runs) EXPECT_NE(refusal.find("one process per GPU"), std::string::npos) << refusal;
  }
}

// Who prints and who writes checkpoints, rank by rank, worked by hand.
TEST(Plan, RolesByPlace) {
  struct Expected {
    std::vector<int> prints, gathers, writes;
  };
  auto roles_of_every_rank = [](const Asked& o) {
    const ParallelPlan plan = plan_of(o);
    Expected got;
    for (int rank = 0; rank < o.plan.layout.world_size(); ++rank) {
      const Roles roles = plan.roles_of(plan.place_of(rank));
      if (roles.prints) got.prints.push_back(rank);
      if (roles.gathers_checkpoint) got.gathers.push_back(rank);
      if (roles.speaks_for_stage) got.writes.push_back(rank);
    }
    return got;
  };
  // 2 x 2: every rank prints; replica 0 of each stage (ranks 0, 1) gathers and writes.
  const Expected plain = roles_of_every_rank(two_by_two());
  EXPECT_EQ(plain.prints, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plain.gathers, (std::vector<int>{0, 1}));
  EXPECT_EQ(plain.writes, (std::vector<int>{0, 1}));
  // 1 stage x 2 replicas x 2 context x 2 tensor ranks, experts over 2 replicas:
  // rank = (replica * 2 + context) * 2 + tensor.
  Asked o = two_by_two();
  o.plan.layout = Layout{1, 2, 2};
  o.plan.layout.context = 2;
  o.model.moe.experts = 4;
  o.plan.experts.parallel = 2;
  const Expected spread = roles_of_every_rank(o);
  EXPECT_EQ(spread.prints, (std::vector<int>{0, 4}));         // tensor 0, context 0
  // The first expert group: averaging ranks (replica * 2 + context) 0 and 1,
  // replica 0's two context ranks, both tensor ranks of each.
  EXPECT_EQ(spread.gathers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(spread.writes, (std::vector<int>{0}));            // replica, tensor and context 0
}

TEST(Plan, TheSchedulesRulesAreItsRefusalsToo) {
  Asked o = two_by_two();
  o.plan.pipeline.schedule = ScheduleKind::kGPipe;
  o.plan.pipeline.stages_per_rank = 2;  // GPipe holds one stage per rank
  const ParallelPlan plan = plan_of(o);
  ASSERT_EQ(plan.refusals().size(), 1u);
  try {
    pipeline::make_schedule(o.plan.pipeline.schedule, 2, 4, 2);
    FAIL() << "make_schedule took v = 2 for GPipe";
  } catch (const pipeline::ScheduleError& e) {
    EXPECT_EQ(plan.refusals().front(), e.what());  // the schedule's own words
  }
  EXPECT_THROW(plan.check(), pipeline::ScheduleError);
}

TEST(Plan, StagesHeldFollowTheSchedulesPlacement) {
  for (const ScheduleKind kind : pipeline::all_kinds()) {
    const Asked o = four_stages(kind);
    const ParallelPlan plan = plan_of(o);
    ASSERT_TRUE(plan.refusals().empty()) << pipeline::kind_name(kind) << ": " << plan.refusals().front();
    const pipeline::Schedule schedule = pipeline::make_schedule(kind, 4, 8, o.plan.pipeline.stages_per_rank);
    ASSERT_EQ(plan.stages(), schedule.num_stages()) << pipeline::kind_name(kind);
    std::set<int> every;
    for (int r = 0; r < 4; ++r)
      for (const int s : plan.stages_held(r)) {
        EXPECT_EQ(schedule.rank_of_stage(s), r) << pipeline::kind_name(kind) << " stage " << s;
        every.insert(s);
      }
    EXPECT_EQ(static_cast<int>(every.size()), plan.stages()) << pipeline::kind_name(kind);  // each held once
  }
  EXPECT_EQ(plan_of(four_stages(ScheduleKind::kZeroBubbleV)).stages_held(0),
            (std::vector<int>{0, 7}));  // the V: r and 2p - 1 - r
  EXPECT_EQ(plan_of(four_stages(ScheduleKind::kInterleaved1F1B)).stages_held(1),
            (std::vector<int>{1, 5}));  // looped: r and r + p
}

TEST(Plan, RankAndPlaceBothWaysAndGroupsAlongEachAxis) {
  Asked o = two_by_two();
  o.plan.layout = Layout{2, 3, 2};  // P, R, T: 12 ranks
  const ParallelPlan plan = plan_of(o);
  for (int rank = 0; rank < 12; ++rank) EXPECT_EQ(plan.rank_of(plan.place_of(rank)), rank);
  for (const Axis axis : kAxes) {
    const auto groups = group_members(o.plan.layout, axis);
    EXPECT_EQ(static_cast<int>(groups.size()), 12 / o.plan.layout.size(axis)) << axis_name(axis);
    std::set<int> seen;
    for (const auto& group : groups) {
      ASSERT_EQ(static_cast<int>(group.size()), o.plan.layout.size(axis));
      const Place first = plan.place_of(group.front());
      for (int k = 0; k < static_cast<int>(group.size()); ++k) {
        const Place p = plan.place_of(group[static_cast<size_t>(k)]);
        EXPECT_EQ(p.at(axis), k);  // group rank = the coordinate along the axis
        for (const Axis other : kAxes)
          if (other != axis) EXPECT_EQ(p.at(other), first.at(other));  // the others fixed
        seen.insert(group[static_cast<size_t>(k)]);
      }
    }
    EXPECT_EQ(seen.size(), 12u) << axis_name(axis);  // every rank in exactly one group
  }
}

TEST(Plan, DescribesItsGroupsAndHeldStages) {
  Asked o = two_by_two();
  o.plan.layout = Layout{2, 2, 2};
  o.plan.data.zero = 0;
  o.model.layers = 4;
  o.plan.pipeline.schedule = ScheduleKind::kInterleaved1F1B;
  o.plan.pipeline.stages_per_rank = 2;
  const std::vector<std::string> lines = plan_of(o).describe();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "pipelines (stage groups): {0, 2} {1, 3} {4, 6} {5, 7}   replica groups (DDP per stage): {0, 4} {1, 5} "
            "{2, 6} {3, 7}");
  EXPECT_EQ(lines[1], "tensor groups (each stage's layers cut): {0, 1} {2, 3} {4, 5} {6, 7}");
  EXPECT_EQ(lines[2], "2 stages per pipeline rank (interleaved), 4 in all: rank 0 holds 0, 2; rank 1 holds 1, 3");
  Asked z = two_by_two();
  z.plan.data.zero = 3;
  EXPECT_EQ(plan_of(z).describe(),
            (std::vector<std::string>{"pipelines (stage groups): {0, 1} {2, 3}   replica groups (ZeRO-3 per stage): "
                                      "{0, 2} {1, 3}"}));
}

}  // namespace
}  // namespace distlab::train
