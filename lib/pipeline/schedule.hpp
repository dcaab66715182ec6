// A pipeline schedule as data: each rank's ordered list of actions.
//
// p ranks hold v stages each, S = p * v stages in all. Where stage s lives
// is the schedule's placement (torch's generate_stage_to_rank_mapping,
// style "loop" or "v"):
//
//   loop: rank s % p (rank 0 holds stages 0, p, 2p, ...); every schedule
//         but the V ones.
//   V:    v = 2, rank r holds stages r and 2p-1-r: the model goes down the
//         ranks and comes back up, so rank 0 holds the first and the last
//         stage, and at rank p-1 the turn (stage p-1 -> stage p) stays on
//         one rank. ZBV and DualPipeV. For p = 2:
//
//           rank 0: stage 0 ----------------> stage 3 (loss)
//                      |                         ^
//           rank 1:    +--> stage 1 --> stage 2 -+   (1 -> 2 in memory)
//
// Either way a rank's stages, in stage order, are its local stages 0..v-1
// (local_index). The batch is cut into m microbatches; every microbatch goes
// forward through stages 0..S-1 and backward through S-1..0.
//
// A builder first orders the compute actions of each rank (F, B, or I and W)
// and then lowers them: a RECV right before every compute that needs data from
// another rank, a SEND right after every compute whose result another rank
// needs. Stages on the same rank hand tensors over in memory, no message.
//
// Message semantics (what the checker proves and the executor does): a SEND
// is posted without blocking (isend; its completion is awaited at the end of
// the step); a RECV blocks its rank until the matching SEND has been posted.
// Each message has its own tag, so matching is by identity, not by order.
#pragma once

#include <string>
#include <vector>

#include "pipeline/action.hpp"

namespace distlab::pipeline {

enum class ScheduleKind {
  kGPipe,
  k1F1B,
  kInterleaved1F1B,
  kLoopedBFS,
  kZeroBubbleH1,
  kInterleavedZeroBubble,
  kZeroBubbleV,
  kDualPipeV,
};

enum class Placement { kLoop, kV };

// The rank holding `stage` of a pipeline of `ranks` ranks.
inline int rank_of_stage(int stage, int ranks, Placement placement) {
  if (placement == Placement::kV) return stage < ranks ? stage : 2 * ranks - 1 - stage;
  return stage % ranks;
}

struct Schedule {
  ScheduleKind kind = ScheduleKind::kGPipe;
  Placement placement = Placement::kLoop;
  int ranks = 1;            // p
  int stages_per_rank = 1;  // v
  int microbatches = 1;     // m
  std::vector<std::vector<Action>> programs;  // programs[rank]: that rank's actions in order

  int num_stages() const { return ranks * stages_per_rank; }
  int rank_of_stage(int stage) const { return pipeline::rank_of_stage(stage, ranks, placement); }
  // Which of its rank's stages `stage` is, counting in stage order from 0:
  // stage / p under both placements (V: stage r is 0, stage 2p-1-r is 1).
  int local_index(int stage) const { return stage / ranks; }
  // "1F1B p=4 m=8 v=1"
  std::string describe() const;
};

// Each kind's row of schedule_kinds.hpp's table, read by name:
// "gpipe", "1f1b", "interleaved", "looped_bfs", "zb_h1", "interleaved_zb",
// "zbv", "dualpipev".
const char* kind_name(ScheduleKind kind);
// "GPipe", "1F1B", "Interleaved 1F1B", ..., "DualPipeV": titles and legends.
const char* display_name(ScheduleKind kind);
// The inverse of kind_name, in any case and with '-' for '_' ("zb-h1", as
// the capstone's --schedule spells it); also accepts "interleaved_1f1b",
// "loopedbfs", "zbh1", torch's class names without "Schedule"
// ("InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"). Throws
// ScheduleError.
ScheduleKind parse_kind(const std::string& name);
std::vector<ScheduleKind> all_kinds();
// Where `kind` puts its stages: V for ZBV and DualPipeV, loop otherwise.
Placement placement_of(ScheduleKind kind);
// The v to build `kind` with when `chunks` stages per rank are wanted: 2
// for the V schedules (always two), `chunks` for the looped multi-stage
// ones, 1 otherwise.
int stages_per_rank_for(ScheduleKind kind, int chunks);

// Builds `kind` for p ranks, m microbatches, v stages per rank. Throws
// ScheduleError for an invalid (p, m, v), naming the rule and the fix:
// GPipe, 1F1B and ZB-H1 hold one stage per rank (v = 1); Interleaved 1F1B,
// LoopedBFS and interleaved zero bubble take any v >= 1; ZBV and DualPipeV
// exactly v = 2 (see builders.cpp, zero_bubble.cpp and v_schedules.cpp for
// what each needs of m).
Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int stages_per_rank = 1);

// Compute-only orders, one list per rank (what the builders produce before
// lower_communication adds the messages). In builders.cpp, zero_bubble.cpp
// and v_schedules.cpp.
std::vector<std::vector<Action>> gpipe_order(int p, int m);
std::vector<std::vector<Action>> one_f_one_b_order(int p, int m);
std::vector<std::vector<Action>> interleaved_order(int p, int m, int v);
std::vector<std::vector<Action>> looped_bfs_order(int p, int m, int v);
std::vector<std::vector<Action>> zero_bubble_h1_order(int p, int m);
std::vector<std::vector<Action>> interleaved_zero_bubble_order(int p, int m, int v);
std::vector<std::vector<Action>> zbv_order(int p, int m);
std::vector<std::vector<Action>> dualpipev_order(int p, int m);

// Inserts RECV_F/RECV_B before and SEND_F/SEND_B after the compute actions
// that need them (see above); an OVERLAP_F_B gets the receives of both its
// halves before it and their sends after it.
std::vector<std::vector<Action>> lower_communication(const std::vector<std::vector<Action>>& compute, int ranks,
                                                     int stages_per_rank, Placement placement = Placement::kLoop);

}  // namespace distlab::pipeline
