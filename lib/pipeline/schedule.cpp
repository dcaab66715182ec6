#include "pipeline/schedule.hpp"

#include <algorithm>
#include <cctype>

#include "pipeline/checker.hpp"
#include "pipeline/schedule_kinds.hpp"

namespace distlab::pipeline {

std::string Schedule::describe() const {
  return std::string(kind_name(kind)) + " p=" + std::to_string(ranks) + " m=" + std::to_string(microbatches) +
         " v=" + std::to_string(stages_per_rank);
}

const char* kind_name(ScheduleKind kind) { return kind_info(kind).name; }

const char* display_name(ScheduleKind kind) { return kind_info(kind).display_name; }

ScheduleKind parse_kind(const std::string& name) {
  std::string n;
  for (char c : name) n += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const KindInfo& k : kind_table()) {
    if (n == k.name) return k.kind;
    if (std::find(k.aliases.begin(), k.aliases.end(), n) != k.aliases.end()) return k.kind;
  }
  std::string names;
  for (const KindInfo& k : kind_table()) names += std::string(names.empty() ? "" : ", ") + k.name;
  throw ScheduleError("unknown schedule '" + name + "'; choose one of " + names);
}

std::vector<ScheduleKind> all_kinds() {
  std::vector<ScheduleKind> kinds;
  for (const KindInfo& k : kind_table()) kinds.push_back(k.kind);
  return kinds;
}

Placement placement_of(ScheduleKind kind) { return kind_info(kind).placement; }

int stages_per_rank_for(ScheduleKind kind, int chunks) {
  switch (kind_info(kind).stages_per_rank) {
    case StagesPerRank::kOne: return 1;
    case StagesPerRank::kTwo: return 2;
    case StagesPerRank::kAny: return std::max(1, chunks);
  }
  return 1;
}

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int stages_per_rank) {
  const KindInfo& info = kind_info(kind);
  const std::string name = info.name;
  require_schedule(ranks >= 1, name + ": " + std::to_string(ranks) + " ranks", "a pipeline needs at least 1 rank");
  require_schedule(microbatches >= 1, name + ": " + std::to_string(microbatches) + " microbatches",
          "cut the batch into at least 1 microbatch");
  require_schedule(stages_per_rank >= 1, name + ": " + std::to_string(stages_per_rank) + " stages per rank",
          "each rank holds at least 1 stage");
  const std::string shape = name + " p=" + std::to_string(ranks) + " m=" + std::to_string(microbatches);
  // torch's ScheduleZBVZeroBubble and ScheduleDualPipeV raise "ZBV requires
  // exactly 2 stages per rank".
  require_schedule(info.stages_per_rank != StagesPerRank::kTwo || stages_per_rank == 2,
          name + " holds exactly two stages per rank in a V, but v=" + std::to_string(stages_per_rank) + " was asked",
          "use v=2 (stages_per_rank_for(kind, ...) gives it): rank r holds stages r and 2p-1-r");
  require_schedule(info.stages_per_rank != StagesPerRank::kOne || stages_per_rank == 1,
          name + " holds one stage per rank, but v=" + std::to_string(stages_per_rank) + " was asked",
          "use v=1, or interleaved / looped_bfs / interleaved_zb for several stages per rank");
  if (info.check_microbatches) info.check_microbatches(shape, ranks, microbatches);

  Schedule s;
  s.kind = kind;
  s.placement = info.placement;
  s.ranks = ranks;
  s.microbatches = microbatches;
  s.stages_per_rank = stages_per_rank;
  s.programs = lower_communication(info.order(ranks, microbatches, stages_per_rank), ranks, stages_per_rank,
                                   info.placement);
  // See interleaved_order: proved for the shapes the tests try, checked here
  // for any other. The orders taken from torch are checked the same way.
  if (info.checked_when_built) {
    const CheckResult result = check(s);
    require_schedule(result.ok, s.describe() + " would not run: " + result.error,
            "choose m a multiple of p, as Megatron-LM does");
  }
  return s;
}

std::vector<std::vector<Action>> lower_communication(const std::vector<std::vector<Action>>& compute, int ranks,
                                                     int stages_per_rank, Placement placement) {
  const int last = ranks * stages_per_rank - 1;
  auto rank_of = [&](int stage) { return rank_of_stage(stage, ranks, placement); };
  auto prev_remote = [&](int s) { return s > 0 && rank_of(s - 1) != rank_of(s); };
  auto next_remote = [&](int s) { return s < last && rank_of(s + 1) != rank_of(s); };
  // What must arrive before `a` runs, and what it sends when done (W: nothing).
  auto receive = [&](const Action& a, std::vector<Action>& out) {
    if (a.type == ActionType::kForward && prev_remote(a.stage)) out.push_back({ActionType::kRecvF, a.stage, a.microbatch});
    if (is_input_backward(a.type) && next_remote(a.stage)) out.push_back({ActionType::kRecvB, a.stage, a.microbatch});
  };
  auto send = [&](const Action& a, std::vector<Action>& out) {
    if (a.type == ActionType::kForward && next_remote(a.stage)) out.push_back({ActionType::kSendF, a.stage, a.microbatch});
    if (is_input_backward(a.type) && prev_remote(a.stage)) out.push_back({ActionType::kSendB, a.stage, a.microbatch});
  };
  std::vector<std::vector<Action>> programs(compute.size());
  for (size_t r = 0; r < compute.size(); ++r) {
    auto& out = programs[r];
    for (const Action& a : compute[r]) {
      for (const Action& part : parts(a)) receive(part, out);
      out.push_back(a);
      for (const Action& part : parts(a)) send(part, out);
    }
  }
  return programs;
}

}  // namespace distlab::pipeline
