// The planner's tables: every accepted layout with its predictions, ranked
// by predicted step time; and predicted against measured once some ran.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "measure.hpp"
#include "planner/enumerate.hpp"
#include "planner/memory_model.hpp"
#include "planner/scores.hpp"
#include "planner/step_time.hpp"

namespace distlab::planner {

struct Ranked {
  Choice choice;
  StepPrediction time;
  MemoryPrediction memory;
  std::string command;  // lesson 11's, on the profile's device (capstone_command)
};

// Every accepted layout predicted, fastest first (ties: less memory first).
std::vector<Ranked> rank_layouts(const ModelShape& model, const std::vector<Choice>& accepted, const Profile& profile);

void print_ranked(std::FILE* out, const ModelShape& model, const std::vector<Ranked>& ranked, size_t top);
void print_refusals(std::FILE* out, const Enumeration& e);

struct MeasuredRow {
  size_t rank = 0;  // 1-based place in the predicted ranking
  Ranked predicted;
  Measured measured;
};
// The whole job's predicted memory: every rank's peak added up (thread
// ranks share one process, whose allocator meter the measurement reads).
int64_t job_bytes(const Ranked& r);

// The scores of the rows that ran: step time and the job's memory; empty
// (layouts 0) when fewer than 2 ran.
struct RowScores {
  Scores time, memory;
};
RowScores score_rows(const std::vector<MeasuredRow>& rows);

// The rows, then the scores of those that ran (when at least 2 did).
void print_measured(std::FILE* out, const ModelShape& model, const std::vector<MeasuredRow>& rows);

}  // namespace distlab::planner
