// A pipeline schedule as data: each rank's ordered list of actions.
//
// p ranks hold v stages each, S = p * v stages in all; stage s lives on rank
// s % p (torch's looped placement: rank 0 holds stages 0, p, 2p, ...). The
// batch is cut into m microbatches; every microbatch goes forward through
// stages 0..S-1 and backward through S-1..0.
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

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved1F1B, kLoopedBFS, kZeroBubbleH1 };

struct Schedule {
  ScheduleKind kind = ScheduleKind::kGPipe;
  int ranks = 1;            // p
  int stages_per_rank = 1;  // v
  int microbatches = 1;     // m
  std::vector<std::vector<Action>> programs;  // programs[rank]: that rank's actions in order

  int num_stages() const { return ranks * stages_per_rank; }
  int rank_of_stage(int stage) const { return stage % ranks; }
  // "1F1B p=4 m=8 v=1"
  std::string describe() const;
};

// "gpipe", "1f1b", "interleaved", "looped_bfs", "zb_h1"
const char* kind_name(ScheduleKind kind);
// The inverse of kind_name, in any case and with '-' for '_' ("zb-h1", as
// the capstone's --schedule spells it); also accepts "interleaved_1f1b",
// "loopedbfs", "zbh1". Throws ScheduleError.
ScheduleKind parse_kind(const std::string& name);
std::vector<ScheduleKind> all_kinds();

// Builds `kind` for p ranks, m microbatches, v stages per rank. Throws
// ScheduleError for an invalid (p, m, v), naming the rule and the fix:
// GPipe, 1F1B and ZB-H1 hold one stage per rank (v = 1); Interleaved 1F1B and
// LoopedBFS take any v >= 1 (see builders.cpp for what each needs of m).
Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int stages_per_rank = 1);

// Compute-only orders, one list per rank (what the builders produce before
// lower_communication adds the messages). In builders.cpp and zero_bubble.cpp.
std::vector<std::vector<Action>> gpipe_order(int p, int m);
std::vector<std::vector<Action>> one_f_one_b_order(int p, int m);
std::vector<std::vector<Action>> interleaved_order(int p, int m, int v);
std::vector<std::vector<Action>> looped_bfs_order(int p, int m, int v);
std::vector<std::vector<Action>> zero_bubble_h1_order(int p, int m);

// Inserts RECV_F/RECV_B before and SEND_F/SEND_B after the compute actions
// that need them (see above).
std::vector<std::vector<Action>> lower_communication(const std::vector<std::vector<Action>>& compute, int ranks,
                                                     int stages_per_rank);

}  // namespace distlab::pipeline
