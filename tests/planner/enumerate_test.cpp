// The enumerator yields exactly what the plan accepts: every candidate of up
// to 8 ranks, generated here by plain loops and given to the plan as
// PlanOptions written here, against the enumerator's accepted list and its
// refusal counts; and the accepted layouts build (train/rank_build.hpp) on
// thread ranks, one per distinct P x R x C x T.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <tuple>

#include "comm/job.hpp"
#include "pipeline/schedule_kinds.hpp"
#include "planner/enumerate.hpp"
#include "planner/memory_model.hpp"
#include "train/rank_build.hpp"

namespace distlab::planner {
namespace {

ModelShape small_model() {
  ModelShape m = model_shape("tiny", 50);  // d 32, ffn 64, 2 heads
  m.lm.nlayers = 4;                            // so that P and P x v reach 4
  return m;
}

// The plan for one candidate, written out here (not plan_of).
train::ParallelPlan plan_here(const ModelShape& m, const train::Layout& l, pipeline::ScheduleKind kind, int v,
                              int64_t microbatches, int zero, memory::Recompute recompute,
                              memory::Precision precision) {
  train::PlanOptions o;
  o.layout = l;
  o.pipeline.schedule = kind;
  o.pipeline.stages_per_rank = v;
  o.pipeline.microbatches = microbatches;
  o.data.zero = zero;
  o.memory.recompute = recompute;
  o.memory.precision = precision;
  train::ModelFacts facts;
  facts.layers = m.lm.nlayers;
  facts.batch_size = m.batch;
  facts.heads = m.lm.nhead;
  facts.ffn = m.lm.nhid;
  facts.causal = true;
  facts.dropout = m.lm.dropout;
  return train::ParallelPlan(o, facts);
}

using Key = std::tuple<int, int, int, int, int, int, int64_t, int, int, int>;
Key key_of(const train::Layout& l, pipeline::ScheduleKind kind, int v, int64_t m, int zero, memory::Recompute r,
           memory::Precision p) {
  return {l.pipeline, l.replicas, l.context, l.tensor, static_cast<int>(kind), v, m, zero, static_cast<int>(r),
          static_cast<int>(p)};
}
Key key_of(const Choice& c) {
  return key_of(c.layout, c.pipeline.schedule, c.pipeline.stages_per_rank, c.pipeline.microbatches, c.data.zero, c.memory.recompute, c.memory.precision);
}

TEST(Enumerate, AcceptsExactlyWhatThePlanAcceptsUpToEightRanks) {
  const ModelShape model = small_model();
  SearchSpace space;
  space.microbatches = {1, 4, 8};
  space.stages_per_rank = {2};
  space.recompute = {memory::Recompute::kNone, memory::Recompute::kMatmuls};
  int total_accepted = 0, total_refused = 0;
  for (int n = 1; n <= 8; ++n) {
    space.world = n;
    const Enumeration e = enumerate(model, space);
    std::set<Key> enumerated;
    for (const Choice& c : e.accepted) enumerated.insert(key_of(c));
    ASSERT_EQ(enumerated.size(), e.accepted.size()) << n << " ranks: a layout listed twice";
    // Plain loops over the same space, the plan asked directly.
    std::set<Key> accepted;
    int refused = 0;
    for (int p = 1; p <= n; ++p)
      for (int r = 1; r <= n; ++r)
        for (int c = 1; c <= n; ++c)
          for (int t = 1; t <= n; ++t) {
            if (p * r * c * t != n) continue;
            const train::Layout l{p, r, t, c};
            for (const pipeline::KindInfo& info : pipeline::kind_table()) {
              if (p == 1 && info.kind != pipeline::ScheduleKind::k1F1B) continue;  // the space's rule
              const int v = info.stages_per_rank == pipeline::StagesPerRank::kOne ? 1 : 2;
              for (const int64_t m : space.microbatches) {
                if (m > model.batch / r) continue;
                for (int zero = 0; zero <= 3; ++zero) {
                  if (zero > 0 && r * c == 1) continue;
                  for (const memory::Recompute rc : space.recompute)
                    for (const memory::Precision pr : space.precision) {
                      const train::ParallelPlan plan = plan_here(model, l, info.kind, v, m, zero, rc, pr);
                      if (plan.refusals().empty()) accepted.insert(key_of(l, info.kind, v, m, zero, rc, pr));
                      else ++refused;
                    }
                }
              }
            }
          }
    EXPECT_EQ(enumerated, accepted) << n << " ranks";
    EXPECT_EQ(e.refused_total, refused) << n << " ranks";
    int counted = 0;
    for (const auto& [rule, count] : e.refused) counted += count;
    EXPECT_EQ(counted, refused) << n << " ranks: the counts by rule add up";
    total_accepted += static_cast<int>(accepted.size());
    total_refused += refused;
  }
  // Both verdicts are exercised.
  EXPECT_GT(total_accepted, 500);
  EXPECT_GT(total_refused, 500);
}

TEST(Enumerate, RefusalsAreCountedByRuleWithTheirNumbersBlanked) {
  EXPECT_EQ(refusal_rule("8 pipeline stages need 8 layers, the model has 4"),
            "# pipeline stages need # layers, the model has #");
  const ModelShape model = small_model();
  SearchSpace space;
  space.world = 8;
  const Enumeration e = enumerate(model, space);
  // 8 stages of a 4-layer model: one rule, whatever the other choices.
  ASSERT_EQ(e.refused.count("# pipeline stages need # layers, the model has #: use --layers #, fewer --pipeline, or a "
                            "larger preset"),
            1u);
}

// One accepted choice per distinct layout of 2..8 ranks, built on thread
// ranks: every rank's stages build, and hold the parameters the memory
// model counts (stage_parameters), measured by their storages.
TEST(Enumerate, AcceptedLayoutsBuild) {
  const ModelShape model = small_model();
  SearchSpace space;
  space.microbatches = {4};
  space.recompute = {memory::Recompute::kNone};
  space.precision = {memory::Precision::kFp32};
  int built = 0;
  for (int n = 2; n <= 8; n += 2) {
    space.world = n;
    std::set<std::tuple<int, int, int, int>> seen;
    for (const Choice& c : enumerate(model, space).accepted) {
      const train::Layout& l = c.layout;
      if (!seen.insert({l.pipeline, l.replicas, l.context, l.tensor}).second) continue;
      models::TransformerLmOptions lm = models::transformer_lm_preset("tiny", model.lm.ntokens);
      lm.nlayers = model.lm.nlayers;
      lm.causal = true;
      const train::ParallelPlan plan = plan_of(model, c);
      comm::JobOptions job;
      job.ranks = n;
      std::mutex mutex;
      std::vector<std::string> wrong(static_cast<size_t>(n));
      comm::run_job(job, [&](comm::Communicator& world) {
        std::string what;
        try {
          train::RankBuild b = train::build_rank(plan, world, lm, 1234, 0.1);
          int64_t held = 0, expected = 0;
          for (size_t k = 0; k < b.stages.size(); ++k) {
            for (const at::Tensor& p : b.stages[k]->parameters()) held += p.numel();
            expected += stage_parameters(model, b.stage_numbers[k], plan.stages(), l.tensor, 1);
          }
          if (held != expected)
            what = "holds " + std::to_string(held) + " parameters, predicted " + std::to_string(expected);
        } catch (const std::exception& e) {
          what = e.what();
        }
        std::lock_guard<std::mutex> lock(mutex);
        wrong[static_cast<size_t>(world.rank())] = what;
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << choice_name(c) << ", rank " << r;
      ++built;
    }
  }
  EXPECT_GE(built, 15);
}

}  // namespace
}  // namespace distlab::planner
