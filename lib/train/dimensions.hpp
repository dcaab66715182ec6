// The plan's dimensions, listed once: each one's rules (a sentence with its
// reason and the fix, for every rule a plan breaks) and its lines of the
// description lesson 11 prints. ParallelPlan::refusals() and describe()
// iterate this list; a new dimension is its options struct (plan.hpp) and
// one entry here.
#pragma once

#include <string>
#include <vector>

#include "train/plan.hpp"

namespace distlab::train {

struct Dimension {
  const char* name;
  // Appends the rules `o` breaks for `model` (no communication: every rank
  // finds the same).
  void (*refusals)(const PlanOptions& o, const ModelFacts& model, std::vector<std::string>& out);
  // Appends its lines (a plan the rules refuse gets those it can draw).
  void (*describe)(const ParallelPlan& plan, std::vector<std::string>& lines);
};

// layout (the sizes and the groups of data x pipeline), data, context,
// tensor, experts, pipeline (v), memory: the order of their rules and of
// the description's lines.
const std::vector<Dimension>& dimensions();

}  // namespace distlab::train
