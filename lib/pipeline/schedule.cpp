#include "pipeline/schedule.hpp"

#include "pipeline/checker.hpp"

#include <algorithm>
#include <cctype>

namespace distlab::pipeline {

namespace {

void require(bool ok, const std::string& what, const std::string& hint) {
  if (!ok) throw ScheduleError(what + "; " + hint);
}

}  // namespace

std::string Schedule::describe() const {
  return std::string(kind_name(kind)) + " p=" + std::to_string(ranks) + " m=" + std::to_string(microbatches) +
         " v=" + std::to_string(stages_per_rank);
}

const char* kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::k1F1B: return "1f1b";
    case ScheduleKind::kInterleaved1F1B: return "interleaved";
    case ScheduleKind::kLoopedBFS: return "looped_bfs";
    case ScheduleKind::kZeroBubbleH1: return "zb_h1";
  }
  return "?";
}

ScheduleKind parse_kind(const std::string& name) {
  std::string n;
  for (char c : name) n += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (ScheduleKind k : all_kinds())
    if (n == kind_name(k)) return k;
  if (n == "interleaved_1f1b" || n == "interleaved1f1b") return ScheduleKind::kInterleaved1F1B;
  if (n == "loopedbfs") return ScheduleKind::kLoopedBFS;
  if (n == "zbh1" || n == "zero_bubble") return ScheduleKind::kZeroBubbleH1;
  throw ScheduleError("unknown schedule '" + name + "'; choose gpipe, 1f1b, interleaved, looped_bfs or zb_h1");
}

std::vector<ScheduleKind> all_kinds() {
  return {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kLoopedBFS,
          ScheduleKind::kZeroBubbleH1};
}

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int stages_per_rank) {
  const std::string name = kind_name(kind);
  require(ranks >= 1, name + ": " + std::to_string(ranks) + " ranks", "a pipeline needs at least 1 rank");
  require(microbatches >= 1, name + ": " + std::to_string(microbatches) + " microbatches",
          "cut the batch into at least 1 microbatch");
  require(stages_per_rank >= 1, name + ": " + std::to_string(stages_per_rank) + " stages per rank",
          "each rank holds at least 1 stage");
  const bool looped = kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kLoopedBFS;
  require(looped || stages_per_rank == 1,
          name + " holds one stage per rank, but v=" + std::to_string(stages_per_rank) + " was asked",
          "use v=1, or interleaved / looped_bfs for several stages per rank");

  Schedule s;
  s.kind = kind;
  s.ranks = ranks;
  s.microbatches = microbatches;
  s.stages_per_rank = stages_per_rank;
  std::vector<std::vector<Action>> compute;
  switch (kind) {
    case ScheduleKind::kGPipe: compute = gpipe_order(ranks, microbatches); break;
    case ScheduleKind::k1F1B: compute = one_f_one_b_order(ranks, microbatches); break;
    case ScheduleKind::kInterleaved1F1B: compute = interleaved_order(ranks, microbatches, stages_per_rank); break;
    case ScheduleKind::kLoopedBFS: compute = looped_bfs_order(ranks, microbatches, stages_per_rank); break;
    case ScheduleKind::kZeroBubbleH1: compute = zero_bubble_h1_order(ranks, microbatches); break;
  }
  s.programs = lower_communication(compute, ranks, stages_per_rank);
  // See interleaved_order: proved for the shapes the tests try, checked here
  // for any other.
  if (kind == ScheduleKind::kInterleaved1F1B) {
    const CheckResult result = check(s);
    require(result.ok, s.describe() + " would not run: " + result.error,
            "choose m a multiple of p, as Megatron-LM does");
  }
  return s;
}

std::vector<std::vector<Action>> lower_communication(const std::vector<std::vector<Action>>& compute, int ranks,
                                                     int stages_per_rank) {
  const int last = ranks * stages_per_rank - 1;
  auto rank_of = [ranks](int stage) { return stage % ranks; };
  std::vector<std::vector<Action>> programs(compute.size());
  for (size_t r = 0; r < compute.size(); ++r) {
    auto& out = programs[r];
    for (const Action& a : compute[r]) {
      const int s = a.stage, i = a.microbatch;
      const bool prev_remote = s > 0 && rank_of(s - 1) != rank_of(s);
      const bool next_remote = s < last && rank_of(s + 1) != rank_of(s);
      if (a.type == ActionType::kForward) {
        if (prev_remote) out.push_back({ActionType::kRecvF, s, i});
        out.push_back(a);
        if (next_remote) out.push_back({ActionType::kSendF, s, i});
      } else if (is_input_backward(a.type)) {
        if (next_remote) out.push_back({ActionType::kRecvB, s, i});
        out.push_back(a);
        if (prev_remote) out.push_back({ActionType::kSendB, s, i});
      } else {
        out.push_back(a);  // W: nothing moves
      }
    }
  }
  return programs;
}

}  // namespace distlab::pipeline
