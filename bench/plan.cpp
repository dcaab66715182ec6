// distlab-bench plan: how far distlab-plan's predictions are from the runs,
// over many layouts, beside the targets, in one run.
//
//   distlab-bench plan                         calibrate, then 16 layouts on 4 ranks and 16 on 8
//   distlab-bench plan --profile planner/profiles/vm-2026-12-01.json --ranks 4 --layouts 8
//
// For each world size: every layout of the preset enumerated and predicted
// (timed: the target is 2 s for 8 ranks), half of --layouts the predicted
// best and half drawn at random from the rest, each run for real (lesson 11
// on thread ranks: --warmup steps, then --steps timed), all of them once a
// pass, --passes times (the median of every pass's steps is compared, with
// their spread), its table as distlab-plan --measure prints it; then, over
// all of them, each figure beside its target and their ratio:
//
//   step time error   |predicted - measured| / measured: mean, worst   8 %, 20 %
//   Spearman          per world size (the order of its layouts)        0.9
//   regret            per world size                                   5 %
//   memory error      the job's predicted bytes against the meter's    1 %
//   memory per rank   each rank's predicted peak against its own meter 1 %
//                     (with --rank-memory, on by default: each layout
//                     that ran is run again for 2 steps under
//                     distlab-run, a process a rank, gloo)
//   enumeration       seconds to enumerate and predict, largest world  2 s
//
// and, with two passes or more, how far the machine is from itself: each
// layout's passes' medians, their difference over the median of all its
// steps (the same command run a minute apart), mean and worst. An error
// no larger than that is the machine's noise, not the model's.
//
// A profile made minutes before the runs predicts this machine as it is
// now (the VM's speed drifts within the hour): without --profile the
// benchmark calibrates first (about a minute and a half).
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_registry.hpp"
#include "planner/calibrate.hpp"
#include "planner/enumerate.hpp"
#include "planner/profile.hpp"
#include "planner/scores.hpp"
#include "rank_memory.hpp"
#include "record.hpp"
#include "runs.hpp"

namespace distlab::bench {
namespace {

using namespace distlab::planner;

struct PlanBenchOptions {
  LayoutSample sample;  // --layouts: half the predicted best, half at random
  std::string profile;
  std::string record_prefix;
  bool rank_memory = true;
  int passes = 2;
};

// Each layout's runs of every pass as one row (measure.hpp's combine).
std::vector<MeasuredRow> combine_passes(const std::vector<std::vector<MeasuredRow>>& passes) {
  std::vector<MeasuredRow> rows = passes.front();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<Measured> runs;
    for (const std::vector<MeasuredRow>& pass : passes) runs.push_back(pass[i].measured);
    rows[i].measured = combine(runs);
  }
  return rows;
}

// Each layout's pass medians, one line a layout that ran in every pass;
// returns their differences: (largest - smallest) / the median of all its steps.
std::vector<double> print_passes(const std::vector<std::vector<MeasuredRow>>& passes,
                                 const std::vector<MeasuredRow>& rows) {
  std::vector<double> differences;
  std::printf("the same layouts, pass against pass (the machine against itself):\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].measured.ok) continue;
    std::string medians;
    double low = 1e300, high = 0;
    for (const std::vector<MeasuredRow>& pass : passes) {
      const double m = pass[i].measured.median_s;
      low = std::min(low, m), high = std::max(high, m);
      char text[32];
      std::snprintf(text, sizeof text, " %9.2f", m * 1e3);
      medians += text;
    }
    const double difference = (high - low) / rows[i].measured.median_s;
    differences.push_back(difference);
    std::printf("%4zu  %-36s pass medians (ms)%s   differ %5.1f%%\n", rows[i].rank,
                choice_name(rows[i].predicted.choice).c_str(), medians.c_str(), 100 * difference);
  }
  return differences;
}

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (const double v : values) sum += v;
  return sum / double(values.size());
}

// Each rank's predicted peak against its own process's meter, for every
// layout in `rows` that ran: one line a layout, every rank's error kept.
std::vector<double> rank_memory_errors(const ModelShape& model, const std::vector<MeasuredRow>& rows,
                                       const MeasureOptions& run) {
  std::vector<double> errors;
  std::printf("each rank's own peak (the layout run again for 2 steps under distlab-run, a process a rank, gloo):\n");
  for (const MeasuredRow& row : rows) {
    if (!row.measured.ok) continue;
    const std::vector<double> mine =
        rank_memory_line(model, row.predicted.choice, row.predicted.command, row.predicted.memory, run);
    errors.insert(errors.end(), mine.begin(), mine.end());
  }
  return errors;
}

void target_line(const char* what, double value, const char* unit, double target, bool higher_is_better) {
  const double scale = std::string(unit) == "%" ? 100 : 1;
  std::printf("%-44s %8.2f %-2s target %6.2f %-2s ratio %.2f%s\n", what, value * scale, unit, target * scale, unit,
              value / target, (higher_is_better ? value >= target : value <= target) ? "  met" : "  not met");
}

int run(const PlanBenchOptions& o) {
  const LayoutSample& sample = o.sample;
  const ModelShape model = model_on_corpus(sample.preset, 0, sample.data);
  Profile profile;
  if (o.profile.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    CalibrationOptions c;
    c.max_ranks = *std::max_element(sample.ranks.begin(), sample.ranks.end());
    std::printf("calibrating %s for the %s preset (about a minute and a half)\n", machine_name().c_str(), sample.preset.c_str());
    std::fflush(stdout);
    profile = calibrate(model, c, [](const std::string&) {});
    std::printf("calibrated in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } else {
    profile = read_profile(o.profile);
    std::printf("profile %s (%s, %s)\n", o.profile.c_str(), profile.machine.c_str(), profile.date.c_str());
  }
  std::vector<MeasuredRow> all;
  std::vector<double> repeat;       // per layout: its passes' medians apart, over its median
  std::vector<double> rank_errors;  // |predicted - measured| / measured, every rank of every layout
  std::vector<std::pair<int, Scores>> per_world;  // world size, its scores (when 2 or more ran)
  double enumeration_s = 0;
  int largest = 0;
  for (const int world : sample.ranks) {
    SearchSpace space;
    space.world = world;
    const auto t0 = std::chrono::steady_clock::now();
    const Enumeration e = enumerate(model, space);
    const std::vector<Ranked> ranked = rank_layouts(model, e.accepted, profile);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (world >= largest) largest = world, enumeration_s = seconds;
    const std::vector<size_t> chosen = choose_to_measure(ranked.size(), sample.layouts / 2, sample.seed);
    std::printf("\n%s preset on %d thread ranks: %zu layouts accepted, predicted in %.2f s; running %zu (%d warm-up "
                "steps, %d timed)\n",
                sample.preset.c_str(), world, ranked.size(), seconds, chosen.size(), sample.run.warmup, sample.run.steps);
    std::fflush(stdout);
    std::vector<std::vector<MeasuredRow>> passes;
    for (int pass = 1; pass <= o.passes; ++pass) {
      if (o.passes > 1) std::printf(" pass %d of %d\n", pass, o.passes);
      passes.push_back(measure_layouts(ranked, chosen, sample.run, false, print_each(stdout)));
    }
    const std::vector<MeasuredRow> rows = combine_passes(passes);
    print_measured(stdout, model, rows);
    if (o.passes > 1) {
      const std::vector<double> differences = print_passes(passes, rows);
      repeat.insert(repeat.end(), differences.begin(), differences.end());
    }
    if (!o.record_prefix.empty()) {
      const std::string path = o.record_prefix + "-" + std::to_string(world) + "-ranks.json";
      write_plan_record(path, model, profile, {o.profile.empty() ? "calibrated by this run" : o.profile, world, int(e.accepted.size()), e.refused_total, seconds},
                        ranked, 0, rows);
      std::printf("wrote %s\n", path.c_str());
    }
    if (o.rank_memory) {
      const std::vector<double> errors = rank_memory_errors(model, rows, sample.run);
      rank_errors.insert(rank_errors.end(), errors.begin(), errors.end());
    }
    const RowScores scores = score_rows(rows);
    if (scores.time.layouts >= 2) per_world.push_back({world, scores.time});
    all.insert(all.end(), rows.begin(), rows.end());
  }

  const RowScores pooled = score_rows(all);
  std::printf("\n");
  if (pooled.time.layouts < 2) {
    std::printf("fewer than 2 layouts ran: no error figures\n");
    return 1;
  }
  std::printf("%d layouts ran (%zu failed)\n", pooled.time.layouts, all.size() - size_t(pooled.time.layouts));
  target_line("step time error, mean", pooled.time.mean_abs_error, "%", 0.08, false);
  target_line("step time error, worst", pooled.time.worst_abs_error, "%", 0.20, false);
  if (!repeat.empty()) {
    std::printf("%-44s %8.2f %%  (no target: the same layout's passes apart)\n", "step time, pass against pass, mean",
                100 * mean(repeat));
    std::printf("%-44s %8.2f %%\n", "step time, pass against pass, worst",
                100 * *std::max_element(repeat.begin(), repeat.end()));
  }
  for (const auto& [world, scores] : per_world) {
    const std::string at = " (" + std::to_string(world) + " ranks)";
    target_line(("Spearman" + at).c_str(), scores.spearman, "", 0.9, true);
    target_line(("regret" + at).c_str(), scores.regret, "%", 0.05, false);
  }
  target_line("memory error, mean", pooled.memory.mean_abs_error, "%", 0.01, false);
  target_line("memory error, worst", pooled.memory.worst_abs_error, "%", 0.01, false);
  if (!rank_errors.empty()) {
    target_line("memory per rank error, mean", mean(rank_errors), "%", 0.01, false);
    target_line("memory per rank error, worst", *std::max_element(rank_errors.begin(), rank_errors.end()), "%", 0.01,
                false);
  }
  target_line(("enumerate and predict, " + std::to_string(largest) + " ranks (s)").c_str(), enumeration_s, "", 2.0,
              false);
  return 0;
}

Registration reg("plan", "distlab-plan's predictions against runs of many layouts: error, Spearman, regret",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<PlanBenchOptions>();
  add_sample_flags(cmd, o->sample, "layouts run per world size: half the predicted best, half at random");
  cmd.add_option("--profile", o->profile, "a profile (distlab-plan calibrate); default: calibrate now");
  cmd.add_option("--warmup", o->sample.run.warmup, "steps before the timed ones")->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd.add_option("--steps", o->sample.run.steps, "timed steps per layout (the median is compared)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  cmd.add_option("--passes", o->passes,
                 "times every layout is run, all of them once a pass (the machine against itself from 2)")
      ->check(CLI::Range(1, 100))->capture_default_str();
  cmd.add_option("--record", o->record_prefix, "write PREFIX-N-ranks.json per world size (the Plan view opens them)");
  cmd.add_flag("--rank-memory,!--no-rank-memory", o->rank_memory,
               "run each layout again under distlab-run (a process a rank) for every rank's own peak memory")
      ->capture_default_str();
  return [o] {
    finish_sample(o->sample);
    return run(*o);
  };
});

}  // namespace
}  // namespace distlab::bench
