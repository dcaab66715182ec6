#include "rank_memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace distlab::bench {

using namespace distlab::planner;

std::vector<double> rank_memory_line(const ModelShape& model, const Choice& c, const std::string& command,
                                     const MemoryPrediction& predicted, const MeasureOptions& run) {
  const int world = c.layout.world_size();
  const RankPeaks peaks = measure_rank_memory(command, world, run);
  if (!peaks.ok) {
    std::printf("  %-44s failed: %s\n", choice_name(c).c_str(), peaks.error.c_str());
    return {};
  }
  const train::ParallelPlan plan = plan_of(model, c);
  std::vector<double> errors;
  double worst = 0;
  std::string line;
  for (int r = 0; r < world; ++r) {
    const int stage = plan.place_of(r).stage;
    int64_t mine = 0;
    for (const RankMemory& m : predicted.ranks)
      if (m.pipeline_rank == stage) mine = m.total();
    const double metered = double(peaks.bytes[static_cast<size_t>(r)]);
    const double error = (double(mine) - metered) / metered;
    errors.push_back(std::abs(error));
    if (std::abs(error) >= std::abs(worst)) worst = error;
    char one[48];
    std::snprintf(one, sizeof one, " %+.1f%%", 100 * error);
    line += one;
  }
  std::printf("  %-44s worst %+6.1f%%  by rank:%s\n", choice_name(c).c_str(), 100 * worst, line.c_str());
  std::fflush(stdout);
  return errors;
}

void add_sample_flags(CLI::App& cmd, LayoutSample& s, const std::string& layouts) {
  s.run.capstone = default_capstone("distlab-bench");
  cmd.add_option("--preset", s.preset, "model: tiny, cpu, tutorial")
      ->check(CLI::IsMember({"tiny", "cpu", "tutorial"}))->capture_default_str();
  cmd.add_option("--ranks", s.ranks, "world sizes")->check(CLI::Range(1, 64))->capture_default_str();
  cmd.add_option("--layouts", s.layouts, layouts)->check(CLI::Range(1, 1000))->capture_default_str();
  cmd.add_option("--seed", s.seed, "the random draw")->capture_default_str();
  cmd.add_option("--data", s.data, "corpus folder (default: the bundled one)");
  cmd.add_option("--timeout", s.run.timeout_s, "seconds before a layout's run is stopped")->capture_default_str();
  cmd.add_option("--capstone", s.run.capstone, "lesson_11_capstone to run (default: the build's)");
}

void finish_sample(LayoutSample& s) {
  s.run.data = s.data;
  s.run.launcher = default_launcher(s.run.capstone);
}

void print_rank_errors(const char* what, const std::vector<double>& errors) {
  if (errors.empty()) return;
  double sum = 0, worst = 0;
  for (const double e : errors) sum += e, worst = std::max(worst, e);
  const auto within = std::count_if(errors.begin(), errors.end(), [](double e) { return e <= 0.01; });
  std::printf("  %-26s mean %5.1f %%, worst %5.1f %%, within 1 %%: %ld of %zu ranks\n", what,
              100 * sum / double(errors.size()), 100 * worst, static_cast<long>(within), errors.size());
}

}  // namespace distlab::bench
