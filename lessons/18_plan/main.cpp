// Lesson 18: predict, then measure.
//
// "Which layout should I use for my model on my machine, and why?" Every
// layout the plan accepts for the capstone's model on N ranks is predicted
// (its memory per rank by category, its step time from this machine's
// profile) and ranked; then the predicted best, the predicted worst and a
// few drawn at random run for real, and the lesson prints its own error
// and explains the largest gap from the prediction's parts.
//
//   lesson_18_plan                                   the cpu preset on 4 ranks, calibrating first
//   lesson_18_plan --ranks 8 --profile planner/profiles/vm-2026-12-01.json --measure 3
//
// The step-time model (lib/planner/step_time.hpp): each stage's forward
// and backward from the model's own pieces as calibrated on this machine,
// the messages from the alpha-beta model, the schedule played by the
// pipeline's rules on cores the ranks share, then averaging and the
// optimizer. On a CPU with fewer cores than ranks, a rank waiting in the
// bubble lends its core to another: the bubble is not idle time.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "lesson.hpp"
#include "planner/calibrate.hpp"
#include "planner/enumerate.hpp"
#include "planner/memory_model.hpp"
#include "planner/profile.hpp"
#include "record.hpp"
#include "runs.hpp"

using namespace distlab;
using namespace distlab::planner;

namespace {

struct Options {
  std::string preset = "cpu";
  int ranks = 4;
  std::string profile;  // "": calibrate now
  std::string data;
  int measure = 1;  // runs, besides the best and the worst: drawn at random
  unsigned seed = 1;
  std::string record;
  MeasureOptions run;
};

const std::vector<std::string> kParts = {"The question", "This machine", "The prediction", "Measured",
                                         "The largest gap", "Memory"};

double ms(double seconds) { return seconds * 1e3; }

// The parts of one layout's predicted step, in the words of the model.
void print_parts(const Ranked& r, const Profile& profile) {
  const StepPrediction& t = r.time;
  std::printf("    pipeline on ranks of their own %8.2f ms  (bubble %.0f %% idle)\n", ms(t.pipeline_s), 100 * t.bubble);
  std::printf("    the same on %d shared cores     %8.2f ms  (%d ranks; a waiting rank lends its core)\n",
              profile.cores, ms(t.critical_s - t.after_s), r.choice.layout.world_size());
  std::printf("    then averaging and optimizer   %8.2f ms\n", ms(t.after_s));
  std::printf("    predicted step                 %8.2f ms  (all ranks' work over the cores: %.2f ms)\n", ms(t.step_s),
              ms(t.packed_s));
}

// What the model leaves out, said of the layout that missed most.
std::string likely_cause(const Ranked& r, double error) {
  const train::Layout& l = r.choice.layout;
  if (error > 0) return "predicted slower than it ran: the pieces were timed on a busier or slower machine";
  if (l.context > 1 || l.tensor > 1)
    return "a cut layer: each ring step or all-reduce waits for the slowest rank of its group, and how long "
           "depends on which ranks hold the cores then; the profile timed the cut layer beside copies of "
           "itself, not beside this layout's other stages";
  if (l.pipeline > 1 && r.time.bubble > 0.3)
    return "a deep bubble: its ranks run in bursts, waking at each handoff, and share the cores otherwise than "
           "the calibration's ranks that were busy all the time";
  if (r.choice.data.zero == 3) return "ZeRO-3 gathers each unit twice a microbatch: many small all-gathers, each its latency";
  if (r.choice.layout.world_size() > 1)
    return "inside a step each action runs slower than it did alone in the calibration (the ranks' caches and "
           "memory traffic, the allocator's lock), more than the calibrated sharing of the cores says";
  return "the pieces were timed in a loop of their own, warm; inside a step they run among the rest of the step";
}

void run(const Options& o, lessons::Parts& parts) {
  const ModelShape model = model_on_corpus(o.preset, 0, o.data);
  std::printf("Lesson 18: predict, then measure  (%s preset, %d thread ranks)\n\n", o.preset.c_str(), o.ranks);

  parts.begin_after_job(0, "The question", true);
  SearchSpace space;
  space.world = o.ranks;
  const auto t0 = std::chrono::steady_clock::now();
  const Enumeration e = enumerate(model, space);
  std::printf("1. The question: the %s preset (d %lld, %lld layers, %lld heads, vocabulary %lld; %lld x %lld tokens "
              "a step) on %d ranks\n",
              o.preset.c_str(), (long long)model.lm.emsize, (long long)model.lm.nlayers, (long long)model.lm.nhead,
              (long long)model.lm.ntokens, (long long)model.batch, (long long)model.bptt, o.ranks);
  std::printf("  %zu layouts the plan accepts (P x R x C x T, schedule, microbatches, ZeRO, recomputation,\n"
              "  precision); %d candidates it refuses, most often because:\n",
              e.accepted.size(), e.refused_total);
  std::vector<std::pair<int, std::string>> rules;
  for (const auto& [rule, count] : e.refused) rules.push_back({count, rule});
  std::sort(rules.rbegin(), rules.rend());
  for (size_t i = 0; i < std::min<size_t>(3, rules.size()); ++i)
    std::printf("  %6d  %s\n", rules[i].first, rules[i].second.c_str());
  std::printf("  Look: every refusal is the plan's own rule (train/plan.hpp); the planner decides none.\n");
  if (e.accepted.empty()) throw std::runtime_error("no layout of the " + o.preset + " preset runs on " + std::to_string(o.ranks) + " ranks");

  parts.begin_after_job(0, "This machine", true);
  Profile profile;
  if (o.profile.empty()) {
    std::printf("\n2. This machine: calibrating (the model's own pieces, the links, the cores shared) ...\n");
    std::fflush(stdout);
    CalibrationOptions c;
    c.max_ranks = std::max(2, o.ranks);
    profile = calibrate(model, c, [](const std::string&) {});
  } else {
    profile = read_profile(o.profile);
    std::printf("\n2. This machine: the profile %s (%s, %s)\n", o.profile.c_str(), profile.machine.c_str(),
                profile.date.c_str());
  }
  const collectives::LinkParams p2p = profile.link("threads", "p2p", 2);
  std::printf("  %d cores; a message between thread ranks: %.1f us + %.2f GB/s\n", profile.cores, p2p.alpha_s * 1e6,
              1e-9 / p2p.beta_s_per_byte);
  for (const std::string precision : {"fp32", "bf16"}) {
    bool any = false;
    for (const SharingPoint& s : profile.sharing)
      if (s.precision == precision) {
        if (!any) std::printf("  busy ranks sharing the cores, each one's slowdown (%s):", precision.c_str());
        std::printf("  %d: %.2fx", s.ranks, s.slowdown);
        any = true;
      }
    if (any) std::printf("\n");
  }
  std::printf("  Look: past %d busy ranks each runs slower; a rank that waits gives its core to the others.\n",
              profile.cores);

  parts.begin_after_job(0, "The prediction", true);
  const std::vector<Ranked> ranked = rank_layouts(model, e.accepted, profile);
  const double predict_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n3. The prediction: %zu layouts ranked by predicted step time (%.2f s with the profile); the top 5:\n",
              ranked.size(), predict_s);
  print_ranked(stdout, model, ranked, 5);
  const Ranked& best = ranked.front();
  const Ranked& worst = ranked.back();
  std::printf("  and the predicted worst: %s, %.2f ms\n", choice_name(worst.choice).c_str(), ms(worst.time.step_s));
  std::printf("  The best's step, part by part:\n");
  print_parts(best, profile);

  parts.begin_after_job(0, "Measured", true);
  // The best and the worst, and the draw of choose_to_measure (its places
  // past its first --measure, which are the predicted best ones).
  std::vector<size_t> chosen = {0, ranked.size() - 1};
  for (const size_t i : choose_to_measure(ranked.size(), o.measure, o.seed))
    if (i >= size_t(o.measure) && i != ranked.size() - 1) chosen.push_back(i);
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());  // one layout: the best is the worst
  std::printf("\n4. Measured: the predicted best, the predicted worst and %d drawn at random, each %d steps after %d\n",
              o.measure, o.run.steps, o.run.warmup);
  std::fflush(stdout);
  const std::vector<MeasuredRow> rows = measure_layouts(ranked, chosen, o.run, false, print_each(stdout));
  print_measured(stdout, model, rows);
  if (!o.record.empty()) {
    write_plan_record(o.record, model, profile,
                      {o.profile.empty() ? "calibrated by lesson 18" : o.profile, o.ranks, int(e.accepted.size()),
                       e.refused_total, predict_s},
                      ranked, 5, rows);
    std::printf("  wrote %s: distlab-viz --panel plan --plan %s draws it\n", o.record.c_str(), o.record.c_str());
  }

  parts.begin_after_job(0, "The largest gap", true);
  const MeasuredRow* surprise = nullptr;
  double largest = -1;
  for (const MeasuredRow& row : rows) {
    if (!row.measured.ok) continue;
    const double error = std::abs(row.predicted.time.step_s - row.measured.median_s) / row.measured.median_s;
    if (error > largest) largest = error, surprise = &row;
  }
  if (surprise == nullptr) {
    std::printf("\n5. The largest gap: no layout ran\n");
  } else {
    const double error = (surprise->predicted.time.step_s - surprise->measured.median_s) / surprise->measured.median_s;
    std::printf("\n5. The largest gap: #%zu %s, predicted %.2f ms, measured %.2f ms (%+.0f %%)\n", surprise->rank,
                choice_name(surprise->predicted.choice).c_str(), ms(surprise->predicted.time.step_s),
                ms(surprise->measured.median_s), 100 * error);
    print_parts(surprise->predicted, profile);
    std::printf("  Likely: %s.\n", likely_cause(surprise->predicted, error).c_str());
  }

  parts.begin_after_job(0, "Memory", true);
  std::printf("\n6. Memory: the predicted best's bytes per rank, by category (the plan's formulas, no model built)\n");
  std::printf("  %5s %11s %11s %11s %11s %11s %11s %11s\n", "stage", "parameters", "gradients", "optimizer", "buffers",
              "activations", "data", "peak");
  for (const RankMemory& m : best.memory.ranks)
    std::printf("  %5d %11s %11s %11s %11s %11s %11s %11s\n", m.pipeline_rank, bytes_text(m.parameters).c_str(),
                bytes_text(m.gradients + m.gradient_shard).c_str(), bytes_text(m.optimizer_state).c_str(),
                bytes_text(m.buffers).c_str(), bytes_text(m.activations + m.backward_scratch).c_str(),
                bytes_text(m.data).c_str(), bytes_text(m.total()).c_str());
  for (const MeasuredRow& row : rows)
    if (row.rank == 1 && row.measured.ok)
      std::printf("  the whole job: predicted %s, the allocator meter's peak %s (%+.1f %%)\n",
                  bytes_text(job_bytes(row.predicted)).c_str(), bytes_text(row.measured.metered_bytes).c_str(),
                  100.0 * double(job_bytes(row.predicted) - row.measured.metered_bytes) /
                      double(row.measured.metered_bytes));
  std::printf("  Look: bytes are deterministic, so memory is predicted far closer than time.\n");
  std::printf("\nNext: --ranks 8, --measure 8, distlab-plan --measure for the whole table, distlab-bench plan for\n"
              "the error over 32 layouts, --record plan.json and distlab-viz --panel plan --plan plan.json.\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.run.capstone = default_capstone(argv[0]);
  lessons::Parts parts(kParts);
  CLI::App app{"Lesson 18: predict every layout of the capstone's model on N ranks, run the best, the worst and a few "
               "others, and print the prediction's own error"};
  parts.add_flags(app);
  app.add_option("--preset", o.preset, "the capstone's model: tiny, cpu, tutorial")
      ->check(CLI::IsMember({"tiny", "cpu", "tutorial"}))->capture_default_str();
  app.add_option("--ranks", o.ranks, "the world: layouts P x R x C x T = N")->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--profile", o.profile, "a profile from distlab-plan calibrate (default: calibrate now, ~20 s)");
  app.add_option("--data", o.data, "corpus folder (default: the bundled one)");
  app.add_option("--measure", o.measure, "layouts run besides the best and the worst, drawn at random")
      ->check(CLI::Range(0, 100))->capture_default_str();
  app.add_option("--seed", o.seed, "the random draw")->capture_default_str();
  app.add_option("--warmup", o.run.warmup, "steps before the timed ones")->check(CLI::Range(0, 100))->capture_default_str();
  app.add_option("--steps", o.run.steps, "timed steps per layout")->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--record", o.record, "write the plan as JSON for the visualizer's Plan view");
  app.add_option("--capstone", o.run.capstone, "lesson_11_capstone to run (default: the build's)");
  CLI11_PARSE(app, argc, argv);
  o.run.data = o.data;
  return lessons::exit_status_of("lesson_18_plan", [&] { run(o, parts); });
}
