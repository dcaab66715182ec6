// distlab-plan: which layout for this model on these ranks, and why.
//
//   distlab-plan calibrate -o profile.json          measure this machine (a minute and a half)
//   distlab-plan --profile profile.json --preset cpu --ranks 8 --top 10
//   distlab-plan ... --memory-per-rank 64MB          only the layouts that fit
//   distlab-plan ... --measure 3                     run the top 3 and 3 others, print the error
//
// Every layout the plan accepts (lib/planner/enumerate.hpp) is predicted
// (memory_model.hpp, step_time.hpp) and ranked; the refused ones are
// counted by the plan's rule. Each row ends with the lesson 11 command
// that runs it.
#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "measure.hpp"
#include "record.hpp"
#include "runs.hpp"
#include "memory/precision.hpp"
#include "planner/calibrate.hpp"
#include "planner/enumerate.hpp"
#include "planner/pieces.hpp"
#include "planner/profile.hpp"
#include "table.hpp"

using namespace distlab;
using namespace distlab::planner;

namespace {

struct Options {
  std::string preset = "cpu";
  int ranks = 8;
  std::string memory_per_rank;
  size_t top = 10;
  std::string profile = "distlab-profile.json";
  int measure = 0;
  bool fail_one = false;
  unsigned seed = 1;
  int64_t vocab = 0;
  std::string data;
  MeasureOptions run;
  std::vector<int64_t> microbatches = {1, 2, 4, 8};
  std::vector<std::string> recompute = {"none", "full", "selective"};
  std::vector<std::string> precision = {"fp32", "bf16"};
  std::string record;  // --record: the plan as a file (record.hpp)
  std::string output = "distlab-profile.json";  // calibrate
  double seconds_per_point = 0.01;
};

ModelShape shape_of(const Options& o) { return model_on_corpus(o.preset, o.vocab, o.data); }

SearchSpace space_of(const Options& o, const std::string& device) {
  SearchSpace space;
  space.world = o.ranks;
  space.microbatches = o.microbatches;
  space.recompute.clear();
  for (const std::string& r : o.recompute) space.recompute.push_back(memory::recompute_from(r));
  space.precision.clear();
  for (const std::string& p : o.precision) {
    const memory::Precision precision = memory::precision_from(p);
    memory::check_precision(precision, device == "cuda" ? c10::DeviceType::CUDA : c10::DeviceType::CPU);
    if (precision == memory::Precision::kFp16)
      throw std::invalid_argument("--precision fp16: its activations' bytes are not derived (autocast on a GPU keeps "
                                  "the softmax in float32, not measured here): plan bf16, which keeps the same "
                                  "2-byte products");
    space.precision.push_back(precision);
  }
  return space;
}

int calibrate_main(const Options& o) {
  const ModelShape model = shape_of(o);
  CalibrationOptions c;
  c.seconds_per_point = o.seconds_per_point;
  c.max_ranks = o.ranks;
  const auto t0 = std::chrono::steady_clock::now();
  std::printf("calibrating %s (%s, LibTorch %s) for the %s preset's shapes\n", machine_name().c_str(), today().c_str(),
              libtorch_version().c_str(), o.preset.c_str());
  const Profile profile = calibrate(model, c, [](const std::string& line) {
    std::printf("  %s\n", line.c_str());
    std::fflush(stdout);
  });
  write_profile(profile, o.output);
  std::printf("wrote %s (%.1f s)\n", o.output.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

int plan_main(const Options& o) {
  const Profile profile = read_profile(o.profile);
  const bool gpus = profile.device == "cuda";
  if (gpus && o.measure > 0)
    throw std::runtime_error("--measure runs thread ranks on this machine's cores; the profile " + o.profile +
                             " is of GPUs: run the commands it ranks on them (scripts/gpu_check.sh on one GPU)");
  const ModelShape model = shape_of(o);
  const int64_t cap = o.memory_per_rank.empty() ? 0 : parse_bytes(o.memory_per_rank);
  const auto t0 = std::chrono::steady_clock::now();
  const Enumeration e = enumerate(model, space_of(o, profile.device), cap);
  if (e.accepted.empty() && e.over_cap == 0) {
    std::string most;
    int most_count = 0;
    for (const auto& [rule, count] : e.refused)
      if (count > most_count) most = rule, most_count = count;
    throw std::runtime_error("no layout of the " + o.preset + " preset runs on " + std::to_string(o.ranks) +
                             " ranks: the plan refuses all " + std::to_string(e.refused_total) + " candidates" +
                             (most.empty() ? std::string() : "; most often: " + most));
  }
  if (e.accepted.empty())
    throw std::runtime_error("no layout fits " + bytes_text(cap) + " per rank: the smallest of the " +
                             std::to_string(e.over_cap) + " the plan accepts needs " + bytes_text(e.smallest_over_cap));
  const std::vector<Ranked> ranked = rank_layouts(model, e.accepted, profile);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s preset (d %lld, ffn %lld, %lld layers, %lld heads, vocabulary %lld; %lld x %lld tokens a step) on "
              "%d %s; profile %s (%s, %s, %d %s)\n",
              o.preset.c_str(), (long long)model.lm.emsize, (long long)model.lm.nhid, (long long)model.lm.nlayers,
              (long long)model.lm.nhead, (long long)model.lm.ntokens, (long long)model.batch, (long long)model.bptt, o.ranks,
              gpus ? "GPUs (a process each, NCCL)" : "thread ranks", o.profile.c_str(), profile.machine.c_str(),
              profile.date.c_str(), profile.cores, gpus ? "GPUs" : "cores");
  std::printf("%zu layouts accepted, %d refused by the plan%s; enumerated and predicted in %.2f s\n",
              e.accepted.size(), e.refused_total,
              cap > 0 ? (", " + std::to_string(e.over_cap) + " over " + bytes_text(cap) + " per rank").c_str() : "",
              seconds);
  if (profile.pieces.empty())
    std::printf("compute: added up from the products (the profile measured no pieces of a model)\n");
  else if (profile.pieces_model != pieces_model(model))
    std::printf("compute: added up from the products (the profile's pieces are of another model: %s; distlab-plan "
                "calibrate --preset %s measures this one's)\n",
                profile.pieces_model.c_str(), o.preset.c_str());
  else
    std::printf("compute: the profile's pieces of this model, measured as the capstone runs them\n");
  print_ranked(stdout, model, ranked, o.top);
  std::printf("refused, by the plan's rule:\n");
  print_refusals(stdout, e);
  if (gpus)
    std::printf("step ms: the schedule with each rank on its own GPU, then averaging and the optimizer; bubble: the "
                "schedule's idle fraction\n");
  else
    std::printf("step ms: the schedule played with every rank that has work sharing the cores (a rank waiting in a "
                "bubble lends its core), then averaging and the optimizer; bubble: the schedule's idle fraction on "
                "ranks of their own\n");
  const PlanHeader header{o.profile, o.ranks, static_cast<int>(e.accepted.size()), e.refused_total, seconds};
  const auto record = [&](const std::vector<MeasuredRow>& rows) {
    if (o.record.empty()) return;
    write_plan_record(o.record, model, profile, header, ranked, o.top, rows);
  };
  record({});
  if (o.measure <= 0) {
    if (!o.record.empty()) std::printf("wrote %s\n", o.record.c_str());
    return 0;
  }

  const std::vector<size_t> chosen = choose_to_measure(ranked.size(), o.measure, o.seed);
  std::printf("measuring %zu layouts (%d warm-up steps, %d timed, thread ranks)%s\n", chosen.size(), o.run.warmup,
              o.run.steps, o.fail_one ? ", and one made to fail on purpose (--chunks 0)" : "");
  std::fflush(stdout);
  // After each layout the record is written again: a viewer opening it sees the runs so far.
  const std::vector<MeasuredRow> rows = measure_layouts(ranked, chosen, o.run, o.fail_one, print_each(stdout, record));
  print_measured(stdout, model, rows);
  record(rows);
  if (!o.record.empty()) std::printf("wrote %s\n", o.record.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.run.capstone = default_capstone(argv[0]);
  CLI::App app{
      "distlab-plan: every layout of a model on N ranks, ranked by predicted step time and memory per rank.\n"
      "Predictions come from a profile of this machine (distlab-plan calibrate: matrix products by shape and\n"
      "precision, element-wise bandwidth, each backend's latency and bandwidth, what ranks cost when they\n"
      "outnumber the cores). --measure K runs the top K and K others for real and prints the prediction's error."};
  app.add_option("--preset", o.preset, "the capstone's model: tiny, cpu, tutorial")->capture_default_str();
  app.add_option("--ranks", o.ranks, "world size N: layouts P x R x C x T = N")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--vocab", o.vocab, "vocabulary size (default: the corpus's); without --data no corpus is read, nor its bytes counted");
  app.add_option("--data", o.data, "corpus folder (default datasets/austen, env DISTLAB_DATA)");
  app.add_option("--microbatches", o.microbatches, "microbatch counts to try")->capture_default_str();
  app.add_option("--recompute", o.recompute, "recomputation policies to try: none full selective matmuls")->capture_default_str();
  app.add_option("--precision", o.precision, "precisions to try: fp32 bf16 (fp16 needs a GPU)")->capture_default_str();
  CLI::App* calibrate = app.add_subcommand("calibrate", "measure this machine and write a profile (about a minute and a half)");
  calibrate->fallthrough();  // --preset, --ranks, --vocab, --data after it too
  calibrate->add_option("-o,--output", o.output, "the profile to write")->capture_default_str();
  calibrate->add_option("--seconds-per-point", o.seconds_per_point, "timed per measurement (accuracy vs time)")
      ->check(CLI::Range(0.001, 10.0))->capture_default_str();
  app.add_option("--profile", o.profile, "the machine's profile (from distlab-plan calibrate)")->capture_default_str();
  app.add_option("--memory-per-rank", o.memory_per_rank, "keep only layouts whose every rank fits: 2GB, 512MB, ...");
  app.add_option("--top", o.top, "rows of the ranked table")->capture_default_str();
  app.add_option("--measure", o.measure, "run the top K and K others drawn at random, print predicted vs measured")
      ->check(CLI::Range(0, 1000));
  app.add_option("--record", o.record, "write the plan (the top rows, every measured one, the scores) as JSON: the "
                 "visualizer's Plan view opens it");
  app.add_flag("--fail-one", o.fail_one, "with --measure: also run one layout made to fail (--chunks 0), to show the run goes on");
  app.add_option("--seed", o.seed, "the random draw of --measure")->capture_default_str();
  app.add_option("--warmup", o.run.warmup, "steps run before the timed ones")->check(CLI::Range(0, 1000))->capture_default_str();
  app.add_option("--steps", o.run.steps, "timed steps per layout (the median is compared)")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--timeout", o.run.timeout_s, "seconds before a measured layout is stopped")->capture_default_str();
  app.add_option("--capstone", o.run.capstone, "lesson_11_capstone to run (default: the build's)");
  CLI11_PARSE(app, argc, argv);
  o.run.data = o.data;
  try {
    return calibrate->parsed() ? calibrate_main(o) : plan_main(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distlab-plan: %s\n", e.what());
    return 1;
  }
}
