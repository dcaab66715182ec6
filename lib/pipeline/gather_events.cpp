#include "pipeline/gather_events.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "collectives/collectives.hpp"
#include "pipeline/simulator.hpp"

namespace distlab::pipeline {
namespace {

const std::vector<std::string> kCategories = {"fwd", "bwd", "bwd_input", "bwd_weight", "send", "recv"};

// One event as a row of the table: stage, category (index in kCategories),
// begin_us, end_us, and 1 to tell a used row from the zeros after it.
constexpr int64_t kColumns = 5;

}  // namespace

std::vector<trace::Event> gather_step_events(comm::Communicator& comm, const std::vector<trace::Event>& mine,
                                             const Schedule& schedule, int64_t step) {
  const std::string name = kind_name(schedule.kind), step_text = std::to_string(step);
  // A rank records at most one event per action of its program in a step,
  // two for an OVERLAP_F_B (its halves).
  size_t longest = 0;
  for (const auto& program : schedule.programs) {
    size_t events = 0;
    for (const Action& a : program) events += parts(a).size();
    longest = std::max(longest, events);
  }
  const int64_t rows_per_rank = static_cast<int64_t>(longest);

  // (p, rows_per_rank, 5) int64: block r is rank r's events, zero rows unused.
  at::Tensor table = at::zeros({comm.size(), rows_per_rank, kColumns}, at::kLong);
  auto rows = table.accessor<int64_t, 3>();
  int64_t n = 0;
  for (const trace::Event& e : mine) {
    if (e.rank != comm.rank() || e.lane.rfind("stage ", 0) != 0) continue;
    if (e.arg("schedule") != name || e.arg("step") != step_text) continue;
    const auto category = std::find(kCategories.begin(), kCategories.end(), e.category) - kCategories.begin();
    if (n == rows_per_rank || category == static_cast<int64_t>(kCategories.size())) continue;
    const int64_t row[kColumns] = {std::stoll(e.arg("stage")), category, e.begin_us, e.end_us, 1};
    for (int64_t k = 0; k < kColumns; ++k) rows[comm.rank()][n][k] = row[k];
    ++n;
  }
  table = table.to(comm.device());
  collectives::all_gather(comm, table);  // block r: rank r's rows
  table = table.cpu();
  rows = table.accessor<int64_t, 3>();

  std::vector<trace::Event> all;
  for (int r = 0; r < comm.size(); ++r)
    for (int64_t k = 0; k < rows_per_rank && rows[r][k][4] == 1; ++k) {
      trace::Event e;
      e.rank = r;
      e.lane = stage_lane(static_cast<int>(rows[r][k][0]));
      e.category = kCategories[static_cast<size_t>(rows[r][k][1])];
      e.begin_us = rows[r][k][2];
      e.end_us = rows[r][k][3];
      e.args = {{"stage", std::to_string(rows[r][k][0])}, {"schedule", name}, {"step", step_text}};
      all.push_back(std::move(e));
    }
  return all;
}

}  // namespace distlab::pipeline
