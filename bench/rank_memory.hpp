// Each rank's predicted peak memory against its own process's allocator
// meter: the layout run for 2 steps under distlab-run, a process a rank
// (gloo), lesson 11's --meter-memory line read per rank. distlab-bench plan
// does it for the layouts it timed, distlab-bench plan-memory for layouts
// drawn from the whole enumeration.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "measure.hpp"
#include "planner/memory_model.hpp"

namespace distlab::bench {

// What both benchmarks take: the model, the world sizes, how many layouts
// a world, the random draw, the corpus, and how each layout runs.
struct LayoutSample {
  std::string preset = "cpu";
  std::vector<int> ranks = {4, 8};
  int layouts = 16;
  unsigned seed = 1;
  std::string data;
  planner::MeasureOptions run;
};
// Their flags (--preset --ranks --layouts --seed --data --timeout
// --capstone); `layouts` says what --layouts means.
void add_sample_flags(CLI::App& cmd, LayoutSample& sample, const std::string& layouts);
// Once parsed: the corpus and the launcher (beside the capstone) into `run`.
void finish_sample(LayoutSample& sample);

// Runs `command` (lesson 11's, for `choice`) and prints one line: the
// layout, its worst error and every rank's (predicted - metered) /
// metered, or why it failed. Returns every rank's |error| (none on failure).
std::vector<double> rank_memory_line(const planner::ModelShape& model, const planner::Choice& choice,
                                     const std::string& command, const planner::MemoryPrediction& predicted,
                                     const planner::MeasureOptions& run);

// "  name  mean ..., worst ..., within 1 %: n of N ranks" over `errors`.
void print_rank_errors(const char* what, const std::vector<double>& errors);

}  // namespace distlab::bench
