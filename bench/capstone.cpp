// distlab-bench capstone: the capstone's training speed for each layout,
// pipeline stages x DDP replicas, side by side in one run: ms per batch and
// tokens per second (the whole job's), on the bundled corpus.
//
//   distlab-bench capstone                                  thread ranks, layouts 1x1 .. 4x1
//   distlab-bench capstone --preset tiny --batches 5        a quick look
//   distlab-run --nproc-per-node 4 -- distlab-bench capstone --backend gloo   4 processes: the 4-rank layouts
//
// Each layout trains the same model (--preset) with the tutorial's loop for
// --warmup + --batches steps of batch 20 x bptt 35 (lib/train/trainer.hpp);
// a step is one batch through the pipeline, DDP's all-reduce, clipping and
// SGD. ms/batch is the median of world rank 0's timed steps (each rank
// waits for the others within a step, so they agree). tokens/s =
// 20 x 35 / that. model GFLOP/s counts 6 x parameters per token (forward
// 2, backward 4; attention's own products left out), a lower bound of the
// arithmetic done.
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "comm/env.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "data/corpus.hpp"
#include "train/trainer.hpp"

namespace distlab::bench {
namespace {

struct CapstoneBenchOptions {
  comm::JobOptions job;
  std::vector<std::string> layouts{"1x1", "2x1", "1x2", "2x2", "1x4", "4x1"};
  std::string preset = "cpu";
  std::string schedule = "1f1b";
  int batches = 10, warmup = 2;
  int64_t chunks = 8;
  std::string data_dir;
};

train::Layout parse_layout(const std::string& text) {
  const auto x = text.find('x');
  try {
    if (x == std::string::npos) throw std::invalid_argument(text);
    train::Layout layout{std::stoi(text.substr(0, x)), std::stoi(text.substr(x + 1))};
    if (layout.pipeline < 1 || layout.replicas < 1) throw std::invalid_argument(text);
    return layout;
  } catch (const std::exception&) {
    throw CLI::ValidationError("--layouts", "'" + text + "' is not PxR (pipeline stages x replicas, e.g. 2x2)");
  }
}

train::TrainerOptions trainer_options(const CapstoneBenchOptions& o, const std::string& layout) {
  train::TrainerOptions t;
  t.plan.layout = parse_layout(layout);
  t.model.preset = o.preset;
  t.plan.pipeline.schedule = pipeline::parse_kind(o.schedule);
  t.plan.pipeline.microbatches = o.chunks;
  t.loop.epochs = 1;
  t.loop.batches_per_epoch = o.warmup + o.batches;
  t.loop.eval_batches = 1;
  t.loop.quiet = true;
  return t;
}

// One layout's timed steps on `comm` (its world size is the layout's);
// world rank 0 prints the row. A failure (more stages than the preset has
// layers, say) is the same on every rank: printed, and the next layout runs.
void run_layout(comm::Communicator& comm, const CapstoneBenchOptions& o, const data::Corpus& corpus,
                const std::string& layout) {
  const train::TrainerOptions t = trainer_options(o, layout);
  const bool speaker = comm.rank() == 0;
  if (comm.size() != t.plan.layout.world_size()) {
    if (speaker)
      std::printf("%-7s %5d  skipped: needs %d ranks, this job has %d\n", layout.c_str(), t.plan.layout.world_size(),
                  t.plan.layout.world_size(), comm.size());
    return;
  }
  train::TrainResult r;
  try {
    r = train::train(comm, corpus, t);
  } catch (const std::exception& e) {
    if (speaker) std::printf("%-7s %5d  failed: %s\n", layout.c_str(), t.plan.layout.world_size(), e.what());
    return;
  }
  if (!speaker) return;
  const std::vector<double> timed(r.step_seconds.begin() + std::min<size_t>(o.warmup, r.step_seconds.size()),
                                  r.step_seconds.end());
  const double step_s = median(timed);
  const double tokens = static_cast<double>(t.loop.batch_size * t.loop.bptt);
  std::printf("%-7s %5d %10.1f %10.0f %10.2f %9lld\n", layout.c_str(), t.plan.layout.world_size(), step_s * 1e3,
              tokens / step_s, 6.0 * static_cast<double>(r.parameters) * tokens / step_s / 1e9,
              static_cast<long long>(r.parameters));
  std::fflush(stdout);
}

// Thread ranks: a job of the layout's size for each layout. Processes: the
// launcher's world is the size there is, so one job runs every layout of
// that size, one after the other.
void run_layouts(const CapstoneBenchOptions& o, const data::Corpus& corpus) {
  if (o.job.backend != "threads") {
    comm::run_job(o.job, [&](comm::Communicator& comm) {
      for (const std::string& layout : o.layouts) run_layout(comm, o, corpus, layout);
    });
    return;
  }
  for (const std::string& layout : o.layouts) {
    comm::JobOptions job = o.job;
    job.ranks = parse_layout(layout).world_size();
    try {
      comm::run_job(job, [&](comm::Communicator& comm) { run_layout(comm, o, corpus, layout); });
    } catch (const std::exception& e) {
      std::printf("%-7s %5d  failed: %s\n", layout.c_str(), job.ranks, e.what());
    }
  }
}

Registration reg("capstone", "the capstone's ms/batch and tokens/s for each layout (stages x replicas)",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<CapstoneBenchOptions>();
  comm::add_job_flags(cmd, o->job);
  cmd.add_option("--layouts", o->layouts, "PxR layouts: pipeline stages x DDP replicas")->capture_default_str();
  cmd.add_option("--preset", o->preset, "model: tiny, cpu, tutorial")
      ->check(CLI::IsMember({"tiny", "cpu", "tutorial"}))->capture_default_str();
  cmd.add_option("--schedule", o->schedule, "pipeline schedule")->check(CLI::IsMember({"gpipe", "1f1b", "zb-h1"}))
      ->capture_default_str();
  cmd.add_option("--chunks", o->chunks, "microbatches per step")->check(CLI::Range(1, 1024))->capture_default_str();
  cmd.add_option("-n,--batches", o->batches, "timed batches per layout")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd.add_option("-w,--warmup", o->warmup, "untimed batches first")->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd.add_option("--data", o->data_dir, "corpus folder (default: the bundled one)");
  return [o] {
    for (const std::string& layout : o->layouts) parse_layout(layout);  // every one checked before the first runs
    const comm::JobOptions job = comm::with_env_defaults(o->job);
    const data::Corpus corpus = data::load_corpus(o->data_dir.empty() ? data::default_corpus_folder() : o->data_dir);
    const bool threads = job.backend == "threads";
    // With processes, every rank prints; world rank 0 alone prints rows.
    const bool speaker = threads || comm::world_from_env().rank == 0;
    if (speaker) {
      std::printf("# capstone, preset %s, %s, %s backend, batch 20 x bptt 35 = 700 tokens, %lld microbatches; "
                  "median of %d batches after %d\n",
                  o->preset.c_str(), o->schedule.c_str(), job.backend.c_str(), static_cast<long long>(o->chunks),
                  o->batches, o->warmup);
      std::printf("%-7s %5s %10s %10s %10s %9s\n", "layout", "ranks", "ms/batch", "tokens/s", "GFLOP/s", "params");
    }
    CapstoneBenchOptions run = *o;
    run.job = job;
    run_layouts(run, corpus);
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
