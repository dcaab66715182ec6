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
    case ScheduleKind::kInterleavedZeroBubble: return "interleaved_zb";
    case ScheduleKind::kZeroBubbleV: return "zbv";
    case ScheduleKind::kDualPipeV: return "dualpipev";
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
  // torch's class names (ScheduleInterleavedZeroBubble, ...) without "Schedule"
  if (n == "interleavedzerobubble" || n == "interleaved_zero_bubble" || n == "interleavedzb")
    return ScheduleKind::kInterleavedZeroBubble;
  if (n == "zbvzerobubble" || n == "zb_v") return ScheduleKind::kZeroBubbleV;
  if (n == "dualpipe_v") return ScheduleKind::kDualPipeV;
  std::string names;
  for (ScheduleKind k : all_kinds()) names += std::string(names.empty() ? "" : ", ") + kind_name(k);
  throw ScheduleError("unknown schedule '" + name + "'; choose one of " + names);
}

std::vector<ScheduleKind> all_kinds() {
  return {ScheduleKind::kGPipe,        ScheduleKind::k1F1B,
          ScheduleKind::kInterleaved1F1B, ScheduleKind::kLoopedBFS,
          ScheduleKind::kZeroBubbleH1, ScheduleKind::kInterleavedZeroBubble,
          ScheduleKind::kZeroBubbleV,  ScheduleKind::kDualPipeV};
}

Placement placement_of(ScheduleKind kind) {
  return kind == ScheduleKind::kZeroBubbleV || kind == ScheduleKind::kDualPipeV ? Placement::kV : Placement::kLoop;
}

int stages_per_rank_for(ScheduleKind kind, int chunks) {
  if (placement_of(kind) == Placement::kV) return 2;
  const bool looped = kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kLoopedBFS ||
                      kind == ScheduleKind::kInterleavedZeroBubble;
  return looped ? std::max(1, chunks) : 1;
}

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int stages_per_rank) {
  const std::string name = kind_name(kind);
  require(ranks >= 1, name + ": " + std::to_string(ranks) + " ranks", "a pipeline needs at least 1 rank");
  require(microbatches >= 1, name + ": " + std::to_string(microbatches) + " microbatches",
          "cut the batch into at least 1 microbatch");
  require(stages_per_rank >= 1, name + ": " + std::to_string(stages_per_rank) + " stages per rank",
          "each rank holds at least 1 stage");
  const std::string shape = name + " p=" + std::to_string(ranks) + " m=" + std::to_string(microbatches);
  const Placement placement = placement_of(kind);
  if (placement == Placement::kV) {
    // torch's ScheduleZBVZeroBubble and ScheduleDualPipeV raise "ZBV requires
    // exactly 2 stages per rank".
    require(stages_per_rank == 2,
            name + " holds exactly two stages per rank in a V, but v=" + std::to_string(stages_per_rank) + " was asked",
            "use v=2 (stages_per_rank_for(kind, ...) gives it): rank r holds stages r and 2p-1-r");
  } else {
    const bool looped = stages_per_rank_for(kind, 2) == 2;
    require(looped || stages_per_rank == 1,
            name + " holds one stage per rank, but v=" + std::to_string(stages_per_rank) + " was asked",
            "use v=1, or interleaved / looped_bfs / interleaved_zb for several stages per rank");
  }
  if (kind == ScheduleKind::kInterleavedZeroBubble) {
    // torch's ScheduleInterleavedZeroBubble: rounds = max(1, m // p) rounds
    // of m // rounds microbatches, and m % rounds == 0 ("Zero bubble requires
    // the number of microbatches to be a multiple of the number of rounds").
    const int rounds = std::max(1, microbatches / ranks);
    const int below = microbatches - microbatches % rounds;
    require(microbatches % rounds == 0,
            shape + ": m must be a multiple of its number of rounds max(1, m / p) = " + std::to_string(rounds),
            "choose m = " + std::to_string(below) + " or another multiple of p (torch's rule)");
  }
  if (kind == ScheduleKind::kDualPipeV) {
    // torch's ScheduleDualPipeV: "DualPipeV requires at least as many
    // microbatches as stages".
    require(microbatches >= 2 * ranks,
            shape + ": DualPipeV needs at least as many microbatches as stages (m >= 2p = " +
                std::to_string(2 * ranks) + ")",
            "choose m >= " + std::to_string(2 * ranks));
  }

  Schedule s;
  s.kind = kind;
  s.placement = placement;
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
    case ScheduleKind::kInterleavedZeroBubble:
      compute = interleaved_zero_bubble_order(ranks, microbatches, stages_per_rank);
      break;
    case ScheduleKind::kZeroBubbleV: compute = zbv_order(ranks, microbatches); break;
    case ScheduleKind::kDualPipeV: compute = dualpipev_order(ranks, microbatches); break;
  }
  s.programs = lower_communication(compute, ranks, stages_per_rank, placement);
  // See interleaved_order: proved for the shapes the tests try, checked here
  // for any other. The orders taken from torch are checked the same way.
  const bool from_torch = kind == ScheduleKind::kInterleavedZeroBubble || placement == Placement::kV;
  if (kind == ScheduleKind::kInterleaved1F1B || from_torch) {
    const CheckResult result = check(s);
    require(result.ok, s.describe() + " would not run: " + result.error,
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
