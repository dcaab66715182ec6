// pipeline::gather_step_events on thread ranks: every rank ends with every
// rank's events of one step, against the same events picked by hand from
// the whole list; whether a rank is given the whole list (thread ranks
// share a recorder) or only its own (a process each).
#include <gtest/gtest.h>

#include <vector>

#include "comm/threads_backend.hpp"
#include "pipeline/gather_events.hpp"
#include "pipeline/simulator.hpp"
#include "support/print_names.hpp"

namespace distlab::pipeline {
namespace {

constexpr int64_t kStep = 3;

// What the executor would record on `rank` for its program in `step` of
// `schedule` named `name`: one event per action, two for an OVERLAP_F_B (its
// halves, one after the other), at made-up times.
std::vector<trace::Event> program_events(const Schedule& schedule, const std::string& name, int rank, int64_t step) {
  std::vector<trace::Event> events;
  const auto& program = schedule.programs[static_cast<size_t>(rank)];
  for (size_t k = 0; k < program.size(); ++k) {
    int64_t begin = 1'000'000 * step + 10'000 * rank + 100 * static_cast<int64_t>(k);
    for (const Action& a : parts(program[k])) {
      events.push_back({rank, stage_lane(a.stage), to_string(a), action_category(a.type), begin, begin + 40, 64, -1, 0,
                        {{"stage", std::to_string(a.stage)}, {"schedule", name}, {"step", std::to_string(step)}}});
      begin += 50;
    }
  }
  return events;
}

// Everything `rank` recorded: the step asked for, the step before and after,
// another schedule's, and events of other lanes and categories.
std::vector<trace::Event> recorded_by(const Schedule& schedule, int rank) {
  const std::string name = kind_name(schedule.kind);
  std::vector<trace::Event> events;
  for (int64_t step : {kStep - 1, kStep, kStep + 1}) {
    auto mine = program_events(schedule, name, rank, step);
    events.insert(events.end(), mine.begin(), mine.end());
  }
  auto other = program_events(schedule, "other_schedule", rank, kStep);
  events.insert(events.end(), other.begin(), other.end());
  events.push_back({rank, trace::kLaneComm, "send", "send", 5, 6, 8, 1 - rank, 0, {{"step", std::to_string(kStep)}}});
  events.push_back({rank, stage_lane(0), "bucket", "ddp", 7, 8, 8, -1, 0,
                    {{"stage", "0"}, {"schedule", name}, {"step", std::to_string(kStep)}}});
  return events;
}

void expect_same(const std::vector<trace::Event>& got, const std::vector<trace::Event>& want, int rank) {
  ASSERT_EQ(got.size(), want.size()) << "on rank " << rank;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].rank, want[i].rank) << i;
    EXPECT_EQ(got[i].lane, want[i].lane) << i;
    EXPECT_EQ(got[i].category, want[i].category) << i;
    EXPECT_EQ(got[i].begin_us, want[i].begin_us) << i;
    EXPECT_EQ(got[i].end_us, want[i].end_us) << i;
    EXPECT_EQ(got[i].args, want[i].args) << i;
  }
}

class GatherStepEvents : public testing::TestWithParam<std::tuple<int, ScheduleKind>> {};

TEST_P(GatherStepEvents, EveryRankGetsEveryRanksEventsOfTheStep) {
  const auto [p, kind] = GetParam();
  // DualPipeV needs m >= 2p; its compounds record two events each.
  const int m = kind == ScheduleKind::kDualPipeV ? 2 * p : 4;
  const Schedule schedule = make_schedule(kind, p, m, stages_per_rank_for(kind, 2));
  // The reference: step kStep of this schedule, rank by rank, as recorded.
  std::vector<trace::Event> all, want;
  for (int r = 0; r < p; ++r) {
    auto mine = recorded_by(schedule, r);
    all.insert(all.end(), mine.begin(), mine.end());
    auto step = program_events(schedule, kind_name(kind), r, kStep);
    want.insert(want.end(), step.begin(), step.end());
  }
  comm::run_thread_ranks(p, [&](comm::Communicator& comm) {
    expect_same(gather_step_events(comm, all, schedule, kStep), want, comm.rank());
    expect_same(gather_step_events(comm, recorded_by(schedule, comm.rank()), schedule, kStep), want, comm.rank());
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndSchedules, GatherStepEvents,
                         testing::Combine(testing::Values(2, 3),
                                          testing::Values(ScheduleKind::kGPipe, ScheduleKind::k1F1B,
                                                          ScheduleKind::kInterleaved1F1B,
                                                          ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleV,
                                                          ScheduleKind::kDualPipeV)));

// A rank with nothing recorded for the step contributes nothing.
TEST(GatherStepEvents, ARankWithoutEventsAddsNone) {
  const Schedule schedule = make_schedule(ScheduleKind::k1F1B, 2, 2);
  const auto rank0 = program_events(schedule, "1f1b", 0, kStep);
  comm::run_thread_ranks(2, [&](comm::Communicator& comm) {
    const std::vector<trace::Event> mine = comm.rank() == 0 ? rank0 : std::vector<trace::Event>{};
    const auto got = gather_step_events(comm, mine, schedule, kStep);
    expect_same(got, rank0, comm.rank());
  });
}

}  // namespace
}  // namespace distlab::pipeline
