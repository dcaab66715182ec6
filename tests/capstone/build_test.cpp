// The plan's promise over every layout of up to 8 ranks, every strategy,
// dense or with experts (kept on every rank or spread over 2), one stage
// per rank or two (Interleaved 1F1B): what it accepts builds (one accepted
// variant per layout, every strategy and variant somewhere)
// (train/rank_build.hpp) on thread ranks, each rank holding groups whose
// members differ from it along their own axis only and the stages its
// pipeline rank holds; what it refuses never starts: train() fails on every
// rank with the plan's first refusal, the same text everywhere, before
// any collective (a rank that went on would wait for the others forever).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "capstone_runs.hpp"
#include "comm/job.hpp"
#include "train/rank_build.hpp"

namespace distlab {
namespace {

using train::Axis;
using train::Layout;
using train::Place;

struct Variant {
  int zero;
  int experts_over;  // 0: dense; 1: every rank all experts; 2: spread over 2
  int stages_per_rank;
};

std::vector<Layout> layouts_of_up_to(int ranks) {
  std::vector<Layout> out;
  for (int n = 1; n <= ranks; ++n)
    for (int p = 1; p <= n; ++p)
      for (int r = 1; p * r <= n; ++r)
        for (int c = 1; p * r * c <= n; ++c)
          if (n % (p * r * c) == 0) out.push_back(Layout{p, r, n / (p * r * c), c});
  return out;
}

train::TrainerOptions options_for(const Layout& layout, const Variant& v) {
  train::TrainerOptions o = tests::tiny_options(1, 1);
  o.plan.layout = layout;
  o.model.layers = 4;
  o.plan.data.zero = v.zero;
  o.plan.pipeline.stages_per_rank = v.stages_per_rank;
  if (v.stages_per_rank > 1) o.plan.pipeline.schedule = pipeline::ScheduleKind::kInterleaved1F1B;
  if (v.experts_over > 0) o.model.moe.experts = 4, o.plan.experts.parallel = v.experts_over;
  return o;
}

// Every member of `group` sits where `me` sits but along `axis`, and the
// members' coordinates there are 0 .. size-1 in group-rank order.
std::string misplaced(const comm::Communicator& group, Axis axis, const Place& me, const Layout& layout) {
  for (int i = 0; i < group.size(); ++i) {
    Place theirs = train::place_of(group.world_rank_of(i), layout), expected = me;
    expected.at(axis) = i;
    for (const Axis a : train::kAxes)
      if (theirs.at(a) != expected.at(a))
        return std::string(train::axis_name(axis)) + " group rank " + std::to_string(i) + " is world rank " +
               std::to_string(group.world_rank_of(i));
  }
  return "";
}

TEST(PlanBuilds, EveryAcceptedLayoutOfUpToEightRanksBuildsAndEveryRefusedOneNeverStarts) {
  const int64_t vocab = static_cast<int64_t>(tests::small_corpus().vocab.size());
  int accepted = 0, built = 0, refused = 0;
  double accepted_s = 0, refused_s = 0;
  std::map<std::string, int> refusal_counts;
  const std::vector<Layout> layouts = layouts_of_up_to(8);
  for (size_t l = 0; l < layouts.size(); ++l) {
    // Every refused variant is started; of the accepted ones, one per
    // layout is built (~0.1 s each), taken in an order that turns with the
    // layout so that every strategy and variant is built somewhere.
    bool built_one = false;
    for (int k = 0; k < 24; ++k) {
          const Layout& layout = layouts[l];
          const int turned = static_cast<int>((static_cast<size_t>(k) * 5 + l) % 24);  // 5: prime to 24
          const int zero = turned / 6, experts_over = turned % 6 / 2, v = 1 + turned % 2;
          const train::TrainerOptions o = options_for(layout, {zero, experts_over, v});
          const train::ParallelPlan plan = train::plan_for(o, vocab);
          const std::vector<std::string> refusals = plan.refusals();
          const std::string name = layout.text() + ", " + plan.strategy() + ", experts over " +
                                   std::to_string(experts_over) + ", v " + std::to_string(v);
          comm::JobOptions job;
          job.backend = "threads";
          job.ranks = layout.world_size();
          std::mutex mutex;
          std::vector<std::string> failures(static_cast<size_t>(job.ranks));
          const auto t0 = std::chrono::steady_clock::now();
          if (!refusals.empty()) {
            ++refused;
            ++refusal_counts[refusals.front().substr(0, 40)];
            comm::run_job(job, [&](comm::Communicator& world) {
              std::string what = "started";
              try {
                (void)train::train(world, tests::small_corpus(), o);
              } catch (const std::exception& e) {
                what = e.what();
              }
              std::lock_guard<std::mutex> lock(mutex);
              failures[static_cast<size_t>(world.rank())] = what;
            });
            for (int r = 0; r < job.ranks; ++r) {
              const std::string& what = failures[static_cast<size_t>(r)];
              EXPECT_NE(what.find(refusals.front()), std::string::npos) << name << ", rank " << r << ": " << what;
            }
            refused_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            continue;
          }
          ++accepted;
          if (built_one) continue;
          built_one = true;
          ++built;
          const models::TransformerLmOptions model = train::model_options(o, vocab);
          comm::run_job(job, [&](comm::Communicator& world) {
            std::string wrong;
            try {
              train::RankBuild b = train::build_rank(plan, world, model, o.loop.seed, o.loop.lr);
              const Place me = train::place_of(world.rank(), layout);
              for (const Axis axis : train::kAxes)
                if (wrong.empty()) wrong = misplaced(b.groups.along(axis), axis, me, layout);
              if (b.stages.size() != static_cast<size_t>(v) || b.data_parallel.size() != b.stages.size())
                wrong += " holds " + std::to_string(b.stages.size()) + " stages";
              for (size_t k = 0; k < b.stage_numbers.size(); ++k)  // looped: rank p holds p, p + P, ...
                if (b.stage_numbers[k] != me.stage + int(k) * layout.pipeline)
                  wrong += " stage " + std::to_string(b.stage_numbers[k]) + " at " + std::to_string(k);
              for (const auto& group : b.expert_groups)
                if (group->size() != experts_over) wrong += " an expert group of " + std::to_string(group->size());
              if (experts_over == 2 && b.expert_groups.size() != b.stages.size()) wrong += " no expert groups";
            } catch (const std::exception& e) {
              wrong = e.what();
            }
            std::lock_guard<std::mutex> lock(mutex);
            failures[static_cast<size_t>(world.rank())] = wrong;
          });
          for (int r = 0; r < job.ranks; ++r)
            EXPECT_EQ(failures[static_cast<size_t>(r)], "") << name << ", rank " << r;
          accepted_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  // Both sides are exercised: every refusal met at least once is listed on failure.
  std::string seen;
  for (const auto& [text, count] : refusal_counts) seen += "\n  " + std::to_string(count) + "x " + text;
  std::printf("  %d accepted, %d of them built (%.1f s); %d refused before starting (%.1f s; %zu distinct first "
              "refusals)\n",
              accepted, built, accepted_s, refused, refused_s, refusal_counts.size());
  EXPECT_GT(accepted, 100) << seen;
  EXPECT_GT(built, 40) << seen;
  EXPECT_GT(refused, 100) << seen;
  EXPECT_GE(refusal_counts.size(), 5u) << seen;
}

}  // namespace
}  // namespace distlab
