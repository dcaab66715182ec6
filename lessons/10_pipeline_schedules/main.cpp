// Lesson 10: pipeline schedules.
//
// The tutorial's GPT, split in two by hand as the tutorial's manual_model_split
// does: stage 0 keeps the embedding and the first half of the layers, stage
// 1 the rest, the norm and the output, every parameter under the whole
// model's name. Each schedule (GPipe, 1F1B, Interleaved 1F1B, LoopedBFS,
// ZB-H1; with --schedules also torch's newer interleaved_zb, zbv and
// dualpipev) then runs for real on the same batch, and:
//   1. its loss and every gradient are checked against the unsplit model's;
//   2. its bubble is measured from the trace, beside the simulator's (fed the
//      same run's measured action costs) and beside (p-1)/(m+p-1);
//   3. the activations each stage held at once are counted from the trace.
// Last, the pipelining tutorial's batch_first=False trap: cutting microbatches along dim 0,
// as the tutorial's x.chunk() does, changes the loss.
//
//   lesson_10_pipeline_schedules                       (2 thread ranks, small GPT)
//   lesson_10_pipeline_schedules --trace /tmp/pp.json  (/tmp/pp.gpipe.json, /tmp/pp.1f1b.json, ...)
//   distlab-run --nproc-per-node 2 -- lesson_10_pipeline_schedules --backend gloo
//   lesson_10_pipeline_schedules --seed-shapes         (dim 512, 8 layers, x (32, 500): minutes on CPU)
//   lesson_10_pipeline_schedules --schedules zbv,dualpipev  (the V: rank r holds stages r and 2p-1-r)
//   lesson_10_pipeline_schedules --experts 4 --top-k 2   (each layer's feed-forward 4 experts)
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "lesson.hpp"
#include "over_ranks.hpp"
#include "timing.hpp"
#include "models/copy_state.hpp"
#include "models/gpt.hpp"
#include "models/split.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/gather_events.hpp"
#include "pipeline/measure.hpp"
#include "pipeline/simulator.hpp"
#include "trace/switching_file_sink.hpp"

using namespace distlab;
using lessons::format_seconds;
using pipeline::ScheduleKind;

namespace {

struct Options {
  comm::JobOptions job;
  int64_t dim = 64, layers = 4, heads = 8, ffn = 256, vocab = 1000;
  int64_t seq = 32, batch = 16;  // tokens are (seq, batch): batch_first=False, as the tutorial's x (32, 500)
  int64_t experts = 0, top_k = 1;  // > 0: each layer's feed-forward a mixture of experts
  int microbatches = 4, steps = 3;
  bool seed_shapes = false;
  std::vector<std::string> schedules{"gpipe", "1f1b", "interleaved", "looped_bfs", "zb_h1"};
};

// "Equal" for float32: the split model adds the same numbers in another order
// (per microbatch, then summed), each rounding at ~6e-8 relative; over a few
// thousand terms that stays far below this, while any real mistake (a wrong
// microbatch weight, a missed gradient) is far above it.
constexpr double kRelativeTolerance = 1e-4;

// The tutorial's tokenwise_loss_fn: mean cross entropy over every token.
// logits (A, b, V), targets (A, b).
at::Tensor tokenwise_loss(const at::Tensor& logits, const at::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// The unsplit model, the batch, and the loss and gradients of one step of it:
// what every schedule must reproduce. Built once per process.
struct Reference {
  models::Gpt whole{nullptr};
  at::Tensor tokens, targets;  // (seq, batch) int64
  double loss = 0;
  std::map<std::string, at::Tensor> grads;  // by parameter name
  double seconds = 0;                       // one forward + backward of the whole batch
};

Reference make_reference(const Options& o) {
  models::GptOptions g;
  g.dim = o.dim, g.n_layers = o.layers, g.n_heads = o.heads, g.vocab_size = o.vocab, g.ffn_dim = o.ffn;
  // The seed trains with dropout 0.1; a random mask would differ between the
  // split and the unsplit run, so equality is checked without it.
  g.dropout = 0.0;
  // With experts: dropless and without the auxiliary losses, which are per
  // forward (a capacity and the losses' means change with the microbatch);
  // every token's output is then its own, and the equality holds.
  g.moe.experts = o.experts, g.moe.top_k = o.top_k;
  g.moe.balance_coefficient = g.moe.z_coefficient = 0;
  Reference ref;
  torch::manual_seed(2);  // the same model and batch in every process
  ref.whole = models::Gpt(g);
  // Random tokens, not the tutorial's x = torch.ones: with every token equal,
  // every row of a column is the same vector and the dim-0 trap of part 4
  // would not show.
  ref.tokens = torch::randint(o.vocab, {o.seq, o.batch}, torch::kLong);
  ref.targets = torch::randint(o.vocab, {o.seq, o.batch}, torch::kLong);
  const at::Tensor loss = tokenwise_loss(ref.whole->forward(ref.tokens), ref.targets);
  loss.backward();
  ref.loss = loss.item<double>();
  for (const auto& item : ref.whole->named_parameters()) ref.grads[item.key()] = item.value().grad().clone();
  // Timed once more: the first pass also pays for first touches and allocations.
  const auto start = std::chrono::steady_clock::now();
  tokenwise_loss(ref.whole->forward(ref.tokens), ref.targets).backward();
  ref.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ref;
}

// The sinks this process adds to the communicator's recorder: memory (to
// measure the run) and, with --trace FILE, one file per schedule, FILE with
// the schedule's name inserted (pp.json -> pp.gpipe.json), so that each
// opens on its own in Perfetto or distlab-viz and shows one schedule's
// steps from time 0.
struct Sinks {
  std::shared_ptr<trace::MemorySink> memory = std::make_shared<trace::MemorySink>();
  std::shared_ptr<trace::SwitchingFileSink> files;  // null without --trace
};

// What one schedule did, the same on every rank.
struct Row {
  std::string name;
  int v = 1;
  double loss = 0, loss_diff = 0, grad_diff = 0, grad_rel = 0;
  double step_s = 0;
  pipeline::Measured measured;
  pipeline::Simulation simulated;
  std::string skipped;  // why it did not run, if it did not
};

// This rank's stages of the schedule's S-stage split, in stage order (r, r +
// p, ... looped; r and 2p-1-r in the V of zbv and dualpipev), each holding
// the whole model's weights for its layers.
std::vector<models::Gpt> build_stages(comm::Communicator& comm, const Reference& ref, const pipeline::Schedule& schedule) {
  const auto ranges = models::split_layers(ref.whole->options().n_layers, schedule.num_stages());
  std::vector<models::Gpt> stages;
  for (int s = 0; s < schedule.num_stages(); ++s) {
    if (schedule.rank_of_stage(s) != comm.rank()) continue;
    const auto [first, end] = ranges[s];
    models::Gpt stage(ref.whole->options(), first, end);
    models::copy_state_by_name(*ref.whole, *stage);
    stages.push_back(stage);
  }
  return stages;
}

void zero_grads(const std::vector<models::Gpt>& stages) {
  for (const auto& stage : stages)
    for (auto& param : stage->parameters())
      if (param.grad().defined()) param.grad().zero_();
}

Row run_schedule(comm::Communicator& comm, const Options& o, const Reference& ref, Sinks& sinks, ScheduleKind kind) {
  const int p = comm.size(), me = comm.rank();
  Row row;
  row.name = pipeline::kind_name(kind);
  row.v = pipeline::stages_per_rank_for(kind, 2);
  if (p * row.v > o.layers) {
    row.skipped = "needs " + std::to_string(p * row.v) + " stages of at least one layer, the model has " +
                  std::to_string(o.layers) + " (--layers " + std::to_string(p * row.v) + ")";
    return row;
  }
  pipeline::Schedule schedule;
  try {
    schedule = pipeline::make_schedule(kind, p, o.microbatches, row.v);
  } catch (const pipeline::ScheduleError& e) {  // a rule of the schedule: dualpipev needs m >= 2p, ...
    row.skipped = e.what();
    return row;
  }
  // Threads share one recorder: rank 0 switches its file while the others wait.
  const bool owns_sinks = comm.backend() != "threads" || me == 0;
  comm.barrier();
  if (owns_sinks) {
    sinks.memory->clear();
    if (sinks.files) {
      const std::string path = sinks.files->open(row.name, comm.world_rank(), comm.backend() != "threads");
      if (me == 0) std::printf("  trace of %s: %s\n", row.name.c_str(), path.c_str());
    }
  }
  comm.barrier();

  std::vector<models::Gpt> stages = build_stages(comm, ref, schedule);
  std::vector<pipeline::StageModule> modules;
  for (auto& stage : stages) modules.push_back(pipeline::stage_of(stage));
  pipeline::ExecutorOptions options;
  options.split_dim = 1;  // batch_first=False: (seq, batch) tokens, batch is dim 1
  options.loss = tokenwise_loss;
  pipeline::PipelineExecutor pipe(comm, schedule, modules, options);

  // Step 0: checked against the unsplit model.
  const pipeline::StepResult result = pipe.step(ref.tokens, ref.targets);
  double grad_diff = 0, grad_rel = 0;
  for (const auto& stage : stages)
    for (const auto& item : stage->named_parameters()) {
      const at::Tensor& want = ref.grads.at(item.key());
      const double diff = (item.value().grad() - want).abs().max().item<double>();
      grad_diff = std::max(grad_diff, diff);
      grad_rel = std::max(grad_rel, diff / std::max(want.abs().max().item<double>(), 1e-30));
    }
  const int last = schedule.rank_of_stage(schedule.num_stages() - 1);
  row.loss = lessons::one_per_rank(comm, result.has_loss ? result.loss : 0.0)[last];
  row.loss_diff = std::abs(row.loss - ref.loss);
  const auto diffs = lessons::one_per_rank(comm, grad_diff), rels = lessons::one_per_rank(comm, grad_rel);
  row.grad_diff = *std::max_element(diffs.begin(), diffs.end());
  row.grad_rel = *std::max_element(rels.begin(), rels.end());

  // Steps 1..steps: timed; the last one is measured from the trace.
  row.step_s = lessons::slowest_rank_seconds(comm, [&] {
                 for (int k = 0; k < o.steps; ++k) {
                   zero_grads(stages);
                   pipe.step(ref.tokens, ref.targets);
                 }
               }) / o.steps;
  const auto events = pipeline::gather_step_events(comm, sinks.memory->events(), schedule, /*step=*/o.steps);
  row.measured = pipeline::measure(events, schedule, o.steps);
  row.simulated = pipeline::simulate(schedule, row.measured.costs);
  return row;
}

// GPipe's loss with microbatches cut along `dim` of the tokens (seq, batch):
// dim 1 as the executor is told above, dim 0 as the pipelining tutorial's x.chunk(m) cuts.
double gpipe_loss_cut_along(comm::Communicator& comm, const Options& o, const Reference& ref, int64_t dim) {
  const pipeline::Schedule gpipe = pipeline::make_schedule(ScheduleKind::kGPipe, comm.size(), o.microbatches);
  std::vector<models::Gpt> stages = build_stages(comm, ref, gpipe);
  pipeline::ExecutorOptions options;
  options.split_dim = dim;
  options.loss = tokenwise_loss;
  options.tag_base = (1 << 16) * static_cast<int>(1 + dim);  // apart from the other runs' messages
  pipeline::PipelineExecutor pipe(comm, gpipe, {pipeline::stage_of(stages[0])}, options);
  const auto result = pipe.step(ref.tokens, ref.targets);
  return lessons::one_per_rank(comm, result.has_loss ? result.loss : 0.0)[comm.size() - 1];
}

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int value : values) text += (text.empty() ? "" : " ") + std::to_string(value);
  return text;
}

void run(comm::Communicator& comm, const Options& o, const Reference& ref, Sinks& sinks, lessons::Parts& parts) {
  const int p = comm.size(), m = o.microbatches, me = comm.rank();
  // The schedule column: 12 wide, or the longest name asked for ("interleaved_zb").
  int w = 12;
  for (const std::string& name : o.schedules)
    w = std::max(w, static_cast<int>(std::string(pipeline::kind_name(pipeline::parse_kind(name))).size()));
  if (p < 2 || p > o.layers)
    throw comm::SetupError("a pipeline of " + std::to_string(o.layers) + " layers needs 2 to " +
                           std::to_string(o.layers) + " ranks, got " + std::to_string(p) + " (--ranks 2)");
  if (me == 0) std::printf("Lesson 10: pipeline schedules  (%s backend, %d ranks)\n\n", comm.backend().c_str(), p);
  parts.begin(comm, "The tutorial's GPT");
  if (me == 0) {
    std::printf("1. The tutorial's GPT: dim %lld, %lld layers, %lld heads, ffn %lld, vocab %lld; tokens (%lld, %lld),\n"
                "   %d microbatches. Split by hand into %d stages, as the tutorial's manual_model_split:\n",
                (long long)o.dim, (long long)o.layers, (long long)o.heads, (long long)o.ffn, (long long)o.vocab,
                (long long)o.seq, (long long)o.batch, m, p);
    if (o.experts > 0)
      std::printf("   Each layer's feed-forward: %lld experts, top-%lld, dropless, no auxiliary losses (a capacity\n"
                  "   and the losses are per forward: a microbatch would change them).\n",
                  (long long)o.experts, (long long)o.top_k);
    const auto ranges = models::split_layers(o.layers, p);
    for (int s = 0; s < p; ++s) {
      // Built here only to show what a stage holds and under which names.
      models::Gpt stage(ref.whole->options(), ranges[s].first, ranges[s].second);
      std::printf("     stage %d: %slayers %lld-%lld%s, %lld parameters, first named %s\n", s,
                  s == 0 ? "tok_embeddings, " : "", (long long)ranges[s].first, (long long)ranges[s].second - 1,
                  s == p - 1 ? ", norm, output" : "", (long long)models::count_parameters(*stage),
                  stage->named_parameters().keys().front().c_str());
    }
    std::printf("   Each stage keeps the whole model's parameter names, and copy_state_by_name gives it the\n"
                "   whole model's weights. The tutorial's other way, the tracer split (pipeline(model,\n"
                "   split_spec={\"layers.4\": SplitPoint.BEGINNING})), has no LibTorch equivalent: C++ has no\n"
                "   tracer that turns a forward() into a graph to cut, so DistLab splits by hand.\n");
    std::printf("   Unsplit model on the whole batch, one process: loss %.6f, %s per forward + backward.\n\n",
                ref.loss, format_seconds(ref.seconds).c_str());
  }

  parts.begin(comm, "The schedules as data");
  if (me == 0) {
    std::printf("2. The schedules as data: each rank's compute actions (stage, F/B/I/W, microbatch)\n");
    for (const std::string& name : o.schedules) {
      const ScheduleKind kind = pipeline::parse_kind(name);
      const int v = pipeline::stages_per_rank_for(kind, 2);
      if (p * v > o.layers) continue;
      pipeline::Schedule order;
      try {
        order = pipeline::make_schedule(kind, p, m, v);
      } catch (const pipeline::ScheduleError&) {
        continue;  // part 3 says why
      }
      for (int r = 0; r < p; ++r) {
        std::vector<pipeline::Action> compute;
        for (const auto& a : order.programs[r])
          if (pipeline::is_compute(a.type)) compute.push_back(a);
        std::printf("   %-*s rank %d: %s\n", w, r == 0 ? pipeline::kind_name(kind) : "", r,
                    pipeline::to_string(compute).c_str());
      }
    }
  }

  parts.begin(comm, "Each schedule run for real");
  if (me == 0)
    std::printf("\n3. Each schedule run for real: step 0 checked, then %s%s\n",
                comm::counted(o.steps, "timed step").c_str(),
                sinks.files ? "" : " (--trace FILE: a trace per schedule)");
  std::vector<Row> rows;
  for (const std::string& name : o.schedules)
    rows.push_back(run_schedule(comm, o, ref, sinks, pipeline::parse_kind(name)));
  comm.barrier();
  if (sinks.files && (comm.backend() != "threads" || me == 0)) sinks.files->close();
  comm.barrier();
  const bool none_ran =
      std::all_of(rows.begin(), rows.end(), [](const Row& r) { return !r.skipped.empty(); });
  bool all_equal = true;
  for (const Row& r : rows)
    if (r.skipped.empty()) all_equal = all_equal && r.loss_diff <= kRelativeTolerance * std::abs(ref.loss) &&
                                       r.grad_rel <= kRelativeTolerance;
  if (me == 0) {
    std::printf("\n   Against the unsplit model (loss %.6f):\n", ref.loss);
    std::printf("   %-*s %2s %10s %11s %16s %14s\n", w, "schedule", "v", "loss", "|loss diff|", "max |grad diff|",
                "relative");
    for (const Row& r : rows) {
      if (!r.skipped.empty()) {
        std::printf("   %-*s %2d  skipped: %s\n", w, r.name.c_str(), r.v, r.skipped.c_str());
        continue;
      }
      std::printf("   %-*s %2d %10.6f %11.2e %16.2e %14.2e\n", w, r.name.c_str(), r.v, r.loss, r.loss_diff, r.grad_diff,
                  r.grad_rel);
    }
  }
  // Nothing compared is nothing shown equal: say so, and fail.
  if (none_ran)
    throw comm::SetupError("none of the schedules asked for ran (each was skipped, see the table): give --layers "
                           "enough for every stage, or other --schedules");
  if (me == 0) {
    std::printf("\n   Time and bubble (idle fraction of the ranks in the last step); peak activations:\n"
                "   microbatches whose activations a stage held at once, measured (simulated)\n");
    std::printf("   %-*s %2s %10s %9s %10s %14s   %s\n", w, "schedule", "v", "step", "measured", "simulated",
                "(p-1)/(m+p-1)", "peak activations per stage");
    for (const Row& r : rows) {
      if (!r.skipped.empty()) continue;
      std::printf("   %-*s %2d %10s %9.3f %10.3f %14.3f   %s (%s)\n", w, r.name.c_str(), r.v,
                  format_seconds(r.step_s).c_str(), r.measured.bubble, r.simulated.bubble,
                  pipeline::gpipe_bubble(p, m), join(r.measured.peak_activations).c_str(),
                  join(r.simulated.peak_activations).c_str());
    }
  }

  parts.begin(comm, "The tutorial's batch_first=False trap");
  const double dim1_loss = gpipe_loss_cut_along(comm, o, ref, 1), dim0_loss = gpipe_loss_cut_along(comm, o, ref, 0);
  if (me == 0) {
    std::printf("\n4. The tutorial's batch_first=False trap: the layers attend along dim 0 of the tokens (%lld, %lld).\n"
                "   the unsplit model:                          loss %.6f\n"
                "   GPipe, cut along dim 1 (the batch, as above): loss %.6f\n"
                "   GPipe, cut along dim 0 (the tutorial's x.chunk(%d)): loss %.6f, %.2e away from the unsplit model's\n"
                "   Cutting dim 0 hands each microbatch %lld of the %lld positions, so each position attends to\n"
                "   fewer others: a different model. (The tutorial's dummy x = torch.ones hides it: every token equal.)\n",
                (long long)o.seq, (long long)o.batch, ref.loss, dim1_loss, m, dim0_loss, std::abs(dim0_loss - ref.loss),
                (long long)(o.seq / m), (long long)o.seq);
    std::printf("\n%s\n", all_equal ? "Every schedule: loss and every gradient equal to the unsplit model's "
                                      "(within float32 rounding)."
                                    : "FAILED: a schedule's loss or gradients differ from the unsplit model's.");
    std::printf("\nLook: GPipe holds all %d microbatches' activations on every stage; 1F1B at most p - s on stage s.\n"
                "The same bubble for both: 1F1B saves memory, not time. Interleaved (v = 2) cuts the bubble\n"
                "(Megatron: by up to v) at the cost of v times the messages; ZB-H1 fills it with deferred\n"
                "weight gradients (W). The simulator, fed this run's own F/B/I/W times, says what the schedule\n"
                "gives when messages are free; the measured bubble differs from it by the time messages take\n"
                "and, with more ranks than cores, by the time a rank waits for a core.\n",
                m);
    std::printf("\nNext: --microbatches 8 or 16 (the bubble falls as (p-1)/(m+p-1)), --ranks 4 --layers 8,\n"
                "--trace /tmp/pp.json and open /tmp/pp.1f1b.json in Perfetto or distlab-viz,\n"
                "distlab-run --nproc-per-node 2 -- lesson_10_pipeline_schedules --backend gloo,\n"
                "--seed-shapes (the tutorial's sizes; on a GPU with --device cuda); then distlab-bench pipeline.\n");
  }
  if (!all_equal)
    throw std::runtime_error("a schedule's loss or gradients differ from the unsplit model's beyond float32 "
                             "rounding (relative " + std::to_string(kRelativeTolerance) + "); see the table");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.job.ranks = 2;  // the tutorial's two stages
  lessons::Parts parts({"The tutorial's GPT", "The schedules as data", "Each schedule run for real",
                        "The tutorial's batch_first=False trap"});
  CLI::App app{"Lesson 10: pipeline schedules on the pipelining tutorial's GPT, checked against the unsplit model"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--dim", o.dim, "model width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", o.layers, "decoder layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads (divides --dim)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--ffn", o.ffn, "feed-forward width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--vocab", o.vocab, "vocabulary size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seq", o.seq, "tokens' dim 0 (the layers attend along it)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch", o.batch, "tokens' dim 1 (independent samples)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--experts", o.experts,
                 "each layer's feed-forward a mixture of this many experts (dropless, top-k), upcycled from it")
      ->check(CLI::Range(0, 256))->capture_default_str();
  app.add_option("--top-k", o.top_k, "experts per token (with --experts)")->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--microbatches", o.microbatches, "m")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps per schedule")->check(CLI::Range(1, 1000))->capture_default_str();
  std::string names;
  for (ScheduleKind kind : pipeline::all_kinds()) names += std::string(names.empty() ? "" : " ") + pipeline::kind_name(kind);
  app.add_option("--schedules", o.schedules, "which to run, of " + names)
      ->delimiter(',')
      ->check(
          [](const std::string& name) {
            try {
              pipeline::parse_kind(name);
              return std::string();
            } catch (const std::exception& e) {
              return std::string(e.what());
            }
          },
          "SCHEDULE")
      ->capture_default_str();
  app.add_flag("--seed-shapes", o.seed_shapes,
               "the pipelining tutorial's sizes: dim 512, 8 layers, 8 heads, ffn 2048, vocab 10000, x (32, 500), 4 microbatches");
  CLI11_PARSE(app, argc, argv);
  if (o.seed_shapes) {
    o.dim = 512, o.layers = 8, o.heads = 8, o.ffn = 2048, o.vocab = 10000, o.seq = 32, o.batch = 500;
    o.microbatches = 4, o.steps = 1;
  }
  // --trace FILE (or DISTLAB_TRACE): the lesson writes one file per schedule
  // itself (Sinks), so the job must write none; the file is taken out of the
  // options and out of the environment that run_lesson completes them from.
  Sinks sinks;
  const std::string trace_file = o.job.trace.with_env_defaults().file;
  if (!trace_file.empty()) sinks.files = std::make_shared<trace::SwitchingFileSink>(trace_file);
  o.job.trace.file.clear();
  ::unsetenv("DISTLAB_TRACE");

  // The reference, once per process and before the job: with all of the
  // process's cores, as one process would train the unsplit model.
  Reference ref;
  const char* program = "lesson_10_pipeline_schedules";
  if (const int status = lessons::exit_status_of(program, [&] {
        if (o.batch < o.microbatches || o.seq < o.microbatches)
          throw std::runtime_error("--batch " + std::to_string(o.batch) + " or --seq " + std::to_string(o.seq) +
                                   " cannot be cut into --microbatches " + std::to_string(o.microbatches) +
                                   " (part 4 cuts along both); give more or fewer microbatches");
        ref = make_reference(o);
      }))
    return status;
  std::once_flag attach;
  return lessons::run_lesson(program, o.job, [&](comm::Communicator& comm) {
    // Once per process: thread ranks share the recorder, gloo ranks each own one.
    std::call_once(attach, [&] {
      comm.recorder()->add_sink(sinks.memory);
      if (sinks.files) comm.recorder()->add_sink(sinks.files);
    });
    comm.barrier();
    run(comm, o, ref, sinks, parts);
  });
}
