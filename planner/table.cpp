#include "table.hpp"

#include <algorithm>

namespace distlab::planner {

std::vector<Ranked> rank_layouts(const ModelShape& model, const std::vector<Choice>& accepted, const Profile& profile) {
  std::vector<Ranked> out;
  out.reserve(accepted.size());
  for (const Choice& c : accepted)
    out.push_back({c, predict_time(model, c, profile), predict_memory(model, c), capstone_command(model, c, profile.device)});
  std::stable_sort(out.begin(), out.end(), [](const Ranked& a, const Ranked& b) {
    if (a.time.step_s != b.time.step_s) return a.time.step_s < b.time.step_s;
    return a.memory.worst().total() < b.memory.worst().total();
  });
  return out;
}

void print_ranked(std::FILE* out, const ModelShape& model, const std::vector<Ranked>& ranked, size_t top) {
  std::fprintf(out, "%4s  %-36s %9s %11s %7s %10s %6s  %s\n", "#", "layout (PxRxCxT schedule m strategy)", "step ms",
               "mem/rank", "bubble", "wire MB", "MFU", "command");
  for (size_t i = 0; i < std::min(top, ranked.size()); ++i) {
    const Ranked& r = ranked[i];
    std::fprintf(out, "%4zu  %-36s %9.2f %11s %6.1f%% %10.2f %5.1f%%  %s\n", i + 1, choice_name(r.choice).c_str(),
                 r.time.step_s * 1e3, bytes_text(r.memory.worst().total()).c_str(), 100 * r.time.bubble,
                 double(r.time.wire_bytes) / 1e6, 100 * r.time.mfu, r.command.c_str());
  }
}

void print_refusals(std::FILE* out, const Enumeration& e) {
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [rule, count] : e.refused) by_count.push_back({count, rule});
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [count, rule] : by_count) std::fprintf(out, "  %6d  %s\n", count, rule.c_str());
}

int64_t job_bytes(const Ranked& r) {
  int64_t all_ranks = 0;
  for (const RankMemory& m : r.memory.ranks) all_ranks += m.total();
  return all_ranks * (r.choice.layout.world_size() / r.choice.layout.pipeline);
}

RowScores score_rows(const std::vector<MeasuredRow>& rows) {
  std::vector<double> predicted, measured, predicted_bytes, metered_bytes;
  for (const MeasuredRow& row : rows) {
    if (!row.measured.ok) continue;
    predicted.push_back(row.predicted.time.step_s);
    measured.push_back(row.measured.median_s);
    predicted_bytes.push_back(double(job_bytes(row.predicted)));
    metered_bytes.push_back(double(row.measured.metered_bytes));
  }
  if (predicted.size() < 2) return {};
  return {score(predicted, measured), score(predicted_bytes, metered_bytes)};
}

void print_measured(std::FILE* out, const ModelShape& /*model*/, const std::vector<MeasuredRow>& rows) {
  std::fprintf(out, "%4s  %-36s %10s %10s %17s %8s %10s %10s %8s %10s\n", "#", "layout", "pred ms", "meas ms",
               "spread (min-max)", "error", "pred mem", "meas mem", "error", "peak RSS");
  for (const MeasuredRow& row : rows) {
    const std::string name = choice_name(row.predicted.choice);
    const int64_t all_ranks = job_bytes(row.predicted);
    if (!row.measured.ok) {
      std::fprintf(out, "%4zu  %-36s %10.2f %10s  failed: %s\n", row.rank, name.c_str(), row.predicted.time.step_s * 1e3,
                   "-", row.measured.error.c_str());
      continue;
    }
    const double error = (row.predicted.time.step_s - row.measured.median_s) / row.measured.median_s;
    char spread[32];
    std::snprintf(spread, sizeof spread, "%.2f-%.2f", row.measured.low_s * 1e3, row.measured.high_s * 1e3);
    const double memory_error = double(all_ranks - row.measured.metered_bytes) / double(row.measured.metered_bytes);
    std::fprintf(out, "%4zu  %-36s %10.2f %10.2f %17s %+7.1f%% %10s %10s %+7.1f%% %10s\n", row.rank, name.c_str(),
                 row.predicted.time.step_s * 1e3, row.measured.median_s * 1e3, spread, 100 * error,
                 bytes_text(all_ranks).c_str(), bytes_text(row.measured.metered_bytes).c_str(), 100 * memory_error,
                 bytes_text(row.measured.peak_rss_bytes).c_str());
  }
  const RowScores scores = score_rows(rows);
  if (scores.time.layouts < 2) {
    std::fprintf(out, "fewer than 2 layouts ran: no error figures\n");
    return;
  }
  const Scores& s = scores.time;
  std::fprintf(out,
               "%d layouts ran: step time error mean %.1f%%, worst %.1f%%; Spearman %.2f; regret %.1f%% (the "
               "predicted best against the measured best)\n",
               s.layouts, 100 * s.mean_abs_error, 100 * s.worst_abs_error, s.spearman, 100 * s.regret);
  std::fprintf(out, "memory error mean %.1f%%, worst %.1f%%\n", 100 * scores.memory.mean_abs_error,
               100 * scores.memory.worst_abs_error);
  std::fprintf(out, "pred mem: every rank's predicted peak added up (thread ranks share one process); meas mem: the "
                    "allocator meter's peak, every rank's tensors together (ranks that peak apart make it smaller); "
                    "peak RSS also holds LibTorch's code and the allocator's caches\n");
}

}  // namespace distlab::planner
