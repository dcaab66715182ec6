// Every layout the plan accepts for a model on N ranks, and why the others
// are not: the candidates of a search space, each asked the plan's own rules
// (train/plan.hpp's refusals(): the planner decides none of them itself),
// then a memory cap per rank (memory_model.hpp).
//
// The space, for a world of N ranks:
//   P x R x C x T = N        every factorization (layout.hpp's axes)
//   schedule and v           every kind of pipeline/schedule_kinds.hpp; v 1
//                            for the one-stage kinds, the given list for the
//                            looped ones, 2 for the V ones; with P = 1 only
//                            1F1B (a pipeline of one rank has no schedule to
//                            choose: the others run the same steps)
//   m                        the given microbatch counts, at most a
//                            replica's columns (the trainer would clip more)
//   ZeRO stage               0..3, ZeRO only when the gradients average over
//                            more than one rank (R x C > 1)
//   experts over N           with a model that has experts: its divisors
//   recomputation, precision the given lists
// Candidates skipped as duplicates are not counted; the refused ones are
// counted by rule (the refusal with its numbers blanked).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/model_shape.hpp"

namespace distlab::planner {

struct SearchSpace {
  int world = 8;
  std::vector<int64_t> microbatches = {1, 2, 4, 8};
  std::vector<int> stages_per_rank = {2};  // v for the looped kinds
  std::vector<pipeline::ScheduleKind> schedules;  // empty: every kind
  std::vector<int> zero = {0, 1, 2, 3};
  std::vector<memory::Recompute> recompute = {memory::Recompute::kNone, memory::Recompute::kFull,
                                              memory::Recompute::kSelective};
  std::vector<memory::Precision> precision = {memory::Precision::kFp32, memory::Precision::kBf16};
};

// Every candidate of the space, before any rule (the test's and the
// enumerator's common ground): the layouts, then the rest, in a fixed order.
std::vector<Choice> candidates(const ModelShape& model, const SearchSpace& space);
std::vector<train::Layout> layouts_of(int world);

struct Enumeration {
  std::vector<Choice> accepted;            // the plan accepts them (and, with a cap, they fit)
  std::map<std::string, int> refused;      // the plan's first refusal, numbers blanked -> how many
  int refused_total = 0;
  int over_cap = 0;                        // accepted by the plan, over the memory cap
  int64_t smallest_over_cap = 0;           // the least memory per rank among those, bytes
};

// `cap_bytes` > 0: keep only those whose predicted memory per rank
// (memory_model.hpp's worst rank) is at most the cap.
Enumeration enumerate(const ModelShape& model, const SearchSpace& space, int64_t cap_bytes = 0);

// The plan's verdict on one candidate: its refusals (empty: accepted).
std::vector<std::string> plan_refusals(const ModelShape& model, const Choice& choice);
// "... # ...": digit runs blanked to '#', the rule without its sizes.
std::string refusal_rule(const std::string& refusal);

}  // namespace distlab::planner
