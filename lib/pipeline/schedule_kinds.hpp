// Every kind of schedule in one table (schedule_kinds.cpp): its names,
// where it puts its stages, what it asks of v and m, the builder of its
// order, and its closed-form bubble. kind_name, parse_kind, placement_of,
// make_schedule, closed_form and the visualizer's legends all read it; a
// new schedule is one row and its order builder.
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule.hpp"

namespace distlab::pipeline {

// How many stages a rank of the kind holds.
enum class StagesPerRank {
  kOne,  // GPipe, 1F1B, ZB-H1
  kAny,  // looped: v >= 1 stages, rank r holding r, r + p, r + 2p, ...
  kTwo,  // a V: exactly stages r and 2p-1-r
};

// The terms a closed-form bubble is written in (closed_form.hpp), for one
// stage (one chunk): F forward, B the whole backward (I + W), W the weight
// gradient, FB DualPipe's overlapped forward-and-backward (F&B).
struct BubbleTerms {
  double F = 0, B = 0, W = 0, FB = 0;
};

struct KindInfo {
  ScheduleKind kind;
  const char* name;          // "interleaved": flags, traces, benchmark rows
  const char* display_name;  // "Interleaved 1F1B": titles and legends
  // Other spellings parse_kind accepts (already lower case, '_' for '-'):
  // torch's class names without "Schedule", the names the papers use.
  std::vector<std::string> aliases;
  Placement placement;
  StagesPerRank stages_per_rank;
  // The compute order of p ranks, m microbatches, v stages per rank (v is
  // 1 or 2 for the kinds that fix it).
  std::vector<std::vector<Action>> (*order)(int p, int m, int v);
  // What the kind asks of m beyond m >= 1: throws ScheduleError naming the
  // rule and the fix; null when any m runs.
  void (*check_microbatches)(const std::string& shape, int p, int m);
  // The builder is proved deadlock-free for the shapes the tests try (or
  // taken from torch): make_schedule runs the checker on every other.
  bool checked_when_built;
  // The closed form: idle seconds per rank = (p-1) * per_hop(terms); null
  // when the sources give none (LoopedBFS).
  double (*per_hop)(const BubbleTerms& t);
  const char* formula;     // "(p-1)(F+B)"
  const char* exact_when;  // "F = I = W, m >= p"
  // The m part of exact_when: where the simulator reproduces the formula.
  bool (*exact_for)(int p, int m);
};

// Throws ScheduleError "what; hint" unless `ok`: the one form of every
// rule make_schedule and the table's rows check.
void require_schedule(bool ok, const std::string& what, const std::string& hint);

// In the order of the ScheduleKind enum.
const std::vector<KindInfo>& kind_table();
const KindInfo& kind_info(ScheduleKind kind);

}  // namespace distlab::pipeline
