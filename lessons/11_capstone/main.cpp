// Lesson 11: the capstone. The DDP + Pipe tutorial on
// DistLab: a Transformer language model cut into P pipeline stages, the
// pipeline replicated R times with DDP, trained with the tutorial's loop.
//
//   rank = replica * P + stage           2 x 2:  pipeline {0, 1}, {2, 3}
//                                                replicas {0, 2}, {1, 3}
//   with --tensor T each stage's layers are also cut across T consecutive
//   ranks: rank = (replica * P + stage) * T + tensor
//   per step: the pipeline runs 8 microbatches (1F1B); each stage's
//   gradients are all-reduced among its replicas once, during the last
//   microbatch's backward; the gradient norm is clipped over the whole
//   model (a sum across the stages); SGD steps.
//
//   lesson_11_capstone --preset tiny                       4 thread ranks, seconds
//   lesson_11_capstone --preset cpu                        a few minutes on 2 cores
//   lesson_11_capstone --pipeline 1 --replicas 4           plain DDP
//   lesson_11_capstone --pipeline 4 --replicas 1 --preset cpu   plain pipeline
//   distlab-run --nproc-per-node 4 -- lesson_11_capstone --backend gloo
//   lesson_11_capstone --preset tiny --trace capstone.json   every rank's pipeline and DDP traffic
//   lesson_11_capstone --preset tiny --zero 2              ZeRO-2 in each replica group instead of DDP
//   lesson_11_capstone --preset tiny --zero 3              ZeRO-3: the stages' parameters sharded too
//   distlab-run --nproc-per-node 4 --max-restarts 1 -- lesson_11_capstone --backend gloo --preset tiny \
//       --checkpoint-dir ckpt --checkpoint-every 2 --kill-rank 3 --kill-at-step 5   failover
//   lesson_11_capstone --preset tiny --tensor 2 --dropout 0    2 x 2 x 2 on 8 thread ranks: each
//       stage's layers cut across 2 tensor ranks (Megatron), the third dimension
//   lesson_11_capstone --preset tiny --context 2 --dropout 0   2 x 2 x 2 on 8 thread ranks: each
//       sequence split over 2 context ranks (ring attention, zigzag chunks), the fourth dimension
//   lesson_11_capstone --preset tiny --experts 4 --top-k 2   each layer's feed-forward 4 experts
//       (a mixture of experts upcycled from it), top-2 routing, the balancing and z-losses
//   lesson_11_capstone --preset tiny --experts 4 --top-k 2 --expert-parallel 2   the experts
//       spread over each stage's 2 replicas (all-to-all), 2 per rank
//   lesson_11_capstone --ranks 3 --elastic --checkpoint-dir ckpt --resume   go on with 3 ranks
//       from a checkpoint of another layout (here 1 x 3, the model re-cut into one stage)
#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "comm/job.hpp"
#include "comm/env.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "data/corpus.hpp"
#include "data/corpus_stats.hpp"
#include "memory/allocator_meter.hpp"
#include "memory/resident.hpp"
#include "memory/flops.hpp"
#include "lesson.hpp"
#include "pipeline/schedule.hpp"
#include "train/trainer.hpp"

using namespace distlab;

namespace {

// A model preset and how long to train it.
struct Preset {
  int64_t epochs, batches_per_epoch, eval_batches;
};

const std::map<std::string, Preset> kPresets = {
    {"tiny", {3, 8, 8}},        // CI: seconds
    {"cpu", {3, 200, 40}},      // 2 CPU cores, 4 thread ranks: ~5 minutes, the loss clearly falls
    {"tutorial", {3, 50, 50}},  // the tutorial's 3 x 50 batches, ~1 B parameters: GPUs
};

struct Options {
  comm::JobOptions job;
  train::TrainerOptions trainer;
  std::string data_dir;
  std::string schedule = "1f1b";
  std::string context_layout = "zigzag", context_method = "ring", recompute = "none";
  std::string precision = "fp32", loss_scale = "auto";
  int64_t epochs = -1, batches_per_epoch = -1, eval_batches = -1;  // -1: the preset's
  int kill_rank = -1;
  int64_t kill_at_step = -1;
  bool meter_memory = false;  // --meter-memory
};

// --kill-rank R --kill-at-step S: world rank R SIGKILLs itself once step S
// is done (and checkpointed, if one was due), on the launcher's first
// attempt only; the restarted job resumes from the newest checkpoint.
std::function<void(int64_t)> killer(const comm::Communicator& comm, const Options& o) {
  if (o.kill_rank < 0) return {};
  if (comm.backend() == "threads")
    throw std::runtime_error("--kill-rank needs one process per rank: use --backend gloo under distlab-run or torchrun "
                             "with --max-restarts");
  if (o.kill_rank >= comm.size() || o.kill_at_step < 1)
    throw std::runtime_error("--kill-rank " + std::to_string(o.kill_rank) + " needs a rank below the world size (" +
                             std::to_string(comm.size()) + ") and --kill-at-step S with S >= 1");
  const int restart = comm::world_from_env().restart_count;
  const int rank = comm.rank();
  return [rank, restart, &o](int64_t step) {
    if (rank != o.kill_rank || step != o.kill_at_step || restart != 0) return;
    std::printf("[RANK %d]: failing on purpose after step %lld (--kill-rank %d --kill-at-step %lld)\n", rank,
                static_cast<long long>(step), o.kill_rank, static_cast<long long>(o.kill_at_step));
    std::fflush(stdout);
    std::raise(SIGKILL);
  };
}

// MFU and HFU (memory/flops.hpp): the tokens rank 0's steps trained and
// their time, the model's FLOPs per token (with experts, each token's k
// feed-forwards), against the matmul peak measured now in the products'
// precision (on all of this machine's cores, or one GPU) times the devices
// the job ran on (GPUs: the world; CPUs: the hosts).
void print_utilisation(const comm::Communicator& comm, const train::TrainerOptions& t, int64_t vocab,
                       const train::TrainResult& r) {
  double seconds = 0;
  for (const double s : r.step_seconds) seconds += s;
  const double tokens = double(r.step_seconds.size()) * double(t.loop.batch_size) * double(t.loop.bptt);
  const models::TransformerLmOptions m = train::model_options(t, vocab);
  const int64_t ffn = m.nhid * (m.moe.enabled() ? m.moe.top_k : 1);
  const memory::FlopShape shape{m.emsize, ffn, m.nlayers, t.loop.bptt, vocab};
  const bool cuda = comm.device().is_cuda();
  const int threads = at::get_num_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!cuda) at::set_num_threads(cores);
  // The best of 2 products after a first one: every test and docs check
  // that runs the capstone pays for this measurement.
  const double peak = memory::matmul_flops_per_second(1024, 2, cuda, memory::compute_dtype(t.plan.memory.precision));
  if (!cuda) at::set_num_threads(threads);
  int devices = 1;
  if (cuda) {
    devices = comm.size();
  } else if (const char* local = std::getenv("LOCAL_WORLD_SIZE"); local != nullptr && std::atoi(local) > 0) {
    devices = std::max(1, comm.size() / std::atoi(local));  // the hosts
  }
  const memory::Utilisation u = memory::utilisation(shape, t.plan.memory.recompute, tokens, seconds, peak * devices);
  std::printf("[RANK 0]: compute: %.2f MFLOP a token (6N + 12Lsd), %.0f tokens/s: %.2f GFLOP/s; matmul peak %.1f "
              "GFLOP/s (%s, %s x %d): MFU %.1f%%, HFU %.1f%%\n",
              double(memory::model_flops_per_token(shape)) / 1e6, u.tokens_per_second,
              u.model_flops_per_second / 1e9, peak * devices / 1e9, memory::to_string(t.plan.memory.precision),
              cuda ? "one GPU" : (std::to_string(cores) + " cores").c_str(), devices, 100 * u.mfu, 100 * u.hfu);
}

// --meter-memory: the allocator meter's peak (memory/allocator_meter.hpp),
// installed once the corpus was read: every CPU byte LibTorch allocated
// for the run's tensors at its fullest (the batches, the stages, their
// gradients and optimizer state, the activations, the buffers). The peak
// is read at each step's end, so the line gives the training steps' own
// (what distlab-plan predicts), then the whole run's: the final digest and
// the evaluations gather and copy parameters of their own. One line a
// process: thread ranks share one allocator, so theirs is the job's. Then
// the process's resident peak (memory/resident.hpp): LibTorch's code and
// the allocator's caches too.
struct StepsPeak {
  std::atomic<int64_t> bytes{0}, step{0};
};
StepsPeak& steps_peak() {
  static StepsPeak peak;
  return peak;
}

std::function<void(int64_t)> reading_the_meter(std::function<void(int64_t)> next, const Options& o) {
  if (!o.meter_memory) return next;
  return [next = std::move(next)](int64_t step) {
    memory::raise_to(steps_peak().bytes, memory::AllocatorMeter::install().peak());
    memory::raise_to(steps_peak().step, step);
    if (next) next(step);
  };
}

void print_metered_peak(comm::Communicator& comm) {
  comm.barrier();
  if (comm.backend() == "threads" && comm.rank() != 0) return;
  std::printf("[RANK %d]: memory: peak %lld bytes allocated on the CPU (the allocator meter, %s) through step %lld; "
              "%lld bytes by the end of the run; resident peak %lld bytes\n",
              comm.rank(), static_cast<long long>(steps_peak().bytes.load()),
              comm.backend() == "threads" ? "every rank of this process" : "this rank's process",
              static_cast<long long>(steps_peak().step.load()),
              static_cast<long long>(memory::AllocatorMeter::install().peak()),
              static_cast<long long>(memory::resident_peak_bytes()));
}

void run(comm::Communicator& comm, const data::Corpus& corpus, const data::CorpusSummary& summary,
         const Options& o, lessons::Parts& parts) {
  train::TrainerOptions t = o.trainer;
  parts.begin(comm, "The layout and the data");
  if (t.checkpoints.elastic) {  // the layout follows the ranks there are: train() decides, we print it first
    const train::FittedLayout fitted = train::layout_for(comm.size(), t, static_cast<int64_t>(corpus.vocab.size()));
    t.plan.layout = fitted.layout;
    if (comm.rank() == 0)
      std::printf("[RANK 0]: elastic: asked %s, %d rank(s) here: %s\n[RANK 0]:   %s\n", o.trainer.plan.layout.text().c_str(),
                  comm.size(), fitted.layout.text().c_str(), fitted.why.c_str());
  }
  if (comm.rank() == 0) {
    std::printf("[RANK 0]: Lesson 11: the capstone, %s on %s (%s)\n", t.plan.layout.text().c_str(),
                comm::backend_ranks(comm.size(), comm.backend()).c_str(), comm.device().str().c_str());
    // The plan train() trains by (train/plan.hpp): its groups and, with
    // several stages per rank, where the schedule places them.
    const train::ParallelPlan plan = train::plan_for(t, static_cast<int64_t>(corpus.vocab.size()));
    for (const std::string& line : plan.describe()) std::printf("[RANK 0]:   %s\n", line.c_str());
    if (t.plan.memory.precision == memory::Precision::kFp16 && comm.device().is_cpu())
      std::printf("[RANK 0]:   fp16 on the CPU is emulated (lib/memory/fp16_emulation.hpp): every product's inputs, "
                  "outputs and gradients rounded to float16, float32 tensors\n");
    std::istringstream lines(data::format_summary(summary));
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) std::printf("[RANK 0]:   %s\n", line.c_str());
    std::printf("[RANK 0]:   preset %s, %s x %s of %lld x %lld tokens, %lld microbatches (%s), "
                "lr %.2f, clip %.2f, dropout %s, causal\n",
                t.model.preset.c_str(), comm::counted(t.loop.epochs, "epoch").c_str(),
                comm::counted(t.loop.batches_per_epoch, "batch", "batches").c_str(),
                static_cast<long long>(t.loop.batch_size), static_cast<long long>(t.loop.bptt),
                static_cast<long long>(t.plan.pipeline.microbatches), o.schedule.c_str(), t.loop.lr, t.loop.clip,
                t.model.dropout < 0 ? "0.2 (preset)" : std::to_string(t.model.dropout).c_str());
    std::fflush(stdout);
  }
  train::TrainerOptions options = t;  // elastic: the layout train() fits to (layout_for), so it keeps it
  options.loop.after_step = reading_the_meter(killer(comm, o), o);
  parts.begin(comm, "Training");
  const train::TrainResult r = train::train(comm, corpus, options);
  parts.begin(comm, "Against the unigram baseline");
  if (comm.rank() == 0 && !r.interrupted)
    std::printf("[RANK 0]: best valid loss %.3f vs the unigram baseline %.3f nats: %s\n", r.best_valid_loss,
                summary.valid_unigram_loss,
                r.best_valid_loss < summary.valid_unigram_loss ? "the model learned from context"
                                                                : "not below the baseline yet (train longer)");
  if (comm.rank() == 0 && !r.interrupted) print_utilisation(comm, options, static_cast<int64_t>(corpus.vocab.size()), r);
  if (o.meter_memory) print_metered_peak(comm);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  train::TrainerOptions& t = o.trainer;
  t.model.preset = "cpu";
  // The parts print no headings of their own: the lines are the tutorial's log.
  lessons::Parts parts({"The layout and the data", "Training", "Against the unigram baseline"});
  CLI::App app{"Lesson 11: the capstone (Transformer LM, pipeline stages x DDP replicas, the tutorial's loop)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--pipeline", t.plan.layout.pipeline, "P: pipeline stages per model")->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--replicas", t.plan.layout.replicas, "R: DDP replicas of the pipeline (world size P*R)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--tensor", t.plan.layout.tensor,
                 "T: tensor ranks cutting each stage's layers (Megatron's heads and MLP split; world size P*R*T)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--context", t.plan.layout.context,
                 "C: context ranks splitting every sequence (ring attention within each layer; world size P*R*C*T)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--context-layout", o.context_layout,
                 "how a sequence is cut over the context ranks: zigzag (rank r holds chunks r and 2C-1-r: even causal "
                 "work) or contiguous")
      ->check(CLI::IsMember({"zigzag", "contiguous"}))->capture_default_str();
  app.add_option("--context-method", o.context_method,
                 "how the context ranks attend: ring (K/V round the ring), all-gather (K/V gathered once), ulysses "
                 "(an all-to-all to whole heads), naive (everything gathered)")
      ->check(CLI::IsMember({"ring", "all-gather", "ulysses", "naive"}))->capture_default_str();
  app.add_option("--experts", t.model.moe.experts,
                 "E: each layer's feed-forward a mixture of E experts (0: the dense one), upcycled from it; every rank "
                 "holds its stages' experts")
      ->check(CLI::Range(0, 1024))->capture_default_str();
  app.add_option("--expert-parallel", t.plan.experts.parallel,
                 "N: spread each stage's experts over N of its replicas (E/N per rank, all-to-all), borrowed from "
                 "the data-parallel dimension")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--top-k", t.model.moe.top_k, "experts per token (with --experts)")->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--capacity-factor", t.model.moe.capacity_factor,
                 "an expert takes at most ceil(tokens k c / E) of a microbatch's assignments, the rest dropped "
                 "(0: dropless)")
      ->check(CLI::Range(0.0, 1000.0))->capture_default_str();
  app.add_option("--preset", t.model.preset, "model and length: tiny (seconds), cpu (minutes on 2 cores), tutorial (~1 B)")
      ->check(CLI::IsMember({"tiny", "cpu", "tutorial"}))->capture_default_str();
  app.add_option("--data", o.data_dir, "corpus folder in WikiText-2's layout (default datasets/austen, env DISTLAB_DATA)");
  app.add_option("--epochs", o.epochs, "epochs (default: the preset's)")->check(CLI::Range(1, 100000));
  app.add_option("--batches-per-epoch", o.batches_per_epoch, "training batches per epoch, 0 = whole epochs (default: the preset's)")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--eval-batches", o.eval_batches, "validation/test batches, 0 = the whole split (default: the preset's)")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--chunks", t.plan.pipeline.microbatches, "microbatches per step")->check(CLI::Range(1, 1024))->capture_default_str();
  std::string kinds;
  for (const pipeline::ScheduleKind kind : pipeline::all_kinds()) kinds += std::string(kinds.empty() ? "" : ", ") + pipeline::kind_name(kind);
  app.add_option("--schedule", o.schedule, "pipeline schedule: " + kinds)->capture_default_str();
  app.add_option("--stages-per-rank", t.plan.pipeline.stages_per_rank,
                 "v: model pieces per pipeline rank, placed as the schedule says (default: 2 for the schedules that "
                 "hold several, else 1; the model is cut into P*v stages)")
      ->check(CLI::Range(1, 16));
  app.add_option("--layers", t.model.layers, "layers of the model (default: the preset's)")->check(CLI::Range(1, 1024));
  app.add_option("--heads", t.model.heads, "attention heads of each layer; they must divide the preset's width "
                                           "(default: the preset's)")->check(CLI::Range(1, 1024));
  app.add_option("--batch-size", t.loop.batch_size, "training columns, all replicas together")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--zero", t.plan.data.zero,
                 "0: DDP all-reduces each stage's gradients; 1: ZeRO-1 (optimizer state sharded in each replica "
                 "group); 2: ZeRO-2 (gradients too); 3: ZeRO-3 (parameters too, gathered unit by unit)")
      ->check(CLI::Range(0, 3))->capture_default_str();
  app.add_option("--lr", t.loop.lr, "SGD learning rate")->capture_default_str();
  app.add_option("--dropout", t.model.dropout, "dropout (default: the preset's 0.2)");
  app.add_option("--recompute", o.recompute,
                 "activations: none (every layer keeps what its backward reads), full (each layer keeps only its "
                 "input and computes the rest again in the backward: least memory, a second forward of every layer), "
                 "selective (the attention core computed again: the s x s tensors not kept) or matmuls (everything "
                 "but the matrix products computed again: their outputs kept)")
      ->check(CLI::IsMember({"none", "full", "selective", "matmuls"}))->capture_default_str();
  app.add_option("--precision", o.precision,
                 "matrix products in fp32, bf16 or fp16 (fp16: CUDA only); norms, the loss, the parameters, their "
                 "gradients and the optimizer stay fp32")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))->capture_default_str();
  app.add_option("--loss-scale", o.loss_scale,
                 "dynamic: the loss scaled up for the backward and the gradients back down, a step with an inf or a "
                 "NaN skipped and the scale halved; none; auto: dynamic for fp16, none otherwise")
      ->check(CLI::IsMember({"auto", "none", "dynamic"}))->capture_default_str();
  app.add_option("--loss-scale-interval", t.plan.memory.loss_scaler.growth_interval,
                 "clean steps in a row before the loss scale doubles")
      ->check(CLI::Range(1, 1 << 30))->capture_default_str();
  app.add_option("--inject-overflow-at-step", t.plan.memory.inject_overflow_at_step,
                 "put an inf into one gradient at this step, to see the loss scaler skip it and back off")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--seed", t.loop.seed, "initial weights")->capture_default_str();
  app.add_option("--log-interval", t.loop.log_interval, "batches per log line")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--checkpoint-dir", t.checkpoints.dir, "write checkpoints here (every epoch; shared by all ranks)");
  app.add_option("--checkpoint-every", t.checkpoints.every, "also every N steps")->check(CLI::Range(0, 100000000));
  app.add_option("--keep", t.checkpoints.keep_last, "checkpoints kept")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_flag("--resume", t.checkpoints.resume, "continue from the newest complete checkpoint (automatic after a launcher restart)");
  app.add_flag("--elastic", t.checkpoints.elastic,
               "fit the layout to the ranks there are (keep --pipeline stages when the world divides by them) and "
               "resume from a checkpoint of any layout");
  app.add_flag("--meter-memory", o.meter_memory,
               "count the CPU bytes LibTorch allocates (the allocator meter) and print the run's peak: what "
               "distlab-plan --measure compares with its prediction");
  app.add_option("--stop-after", t.loop.stop_after_steps, "stop after this many steps, as if interrupted");
  app.add_option("--kill-rank", o.kill_rank, "this world rank SIGKILLs itself after --kill-at-step, first attempt only")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--kill-at-step", o.kill_at_step, "the step after which --kill-rank dies")->check(CLI::Range(1, 1 << 30));
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  const Preset preset = kPresets.at(t.model.preset);
  t.loop.epochs = o.epochs >= 0 ? o.epochs : preset.epochs;
  t.loop.batches_per_epoch = o.batches_per_epoch >= 0 ? o.batches_per_epoch : preset.batches_per_epoch;
  t.loop.eval_batches = o.eval_batches >= 0 ? o.eval_batches : preset.eval_batches;
  try {
    t.plan.pipeline.schedule = pipeline::parse_kind(o.schedule);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lesson_11_capstone: --schedule %s: %s\n", o.schedule.c_str(), e.what());
    return 1;
  }
  t.plan.context.layout = o.context_layout == "zigzag" ? context_parallel::Layout::kZigzag : context_parallel::Layout::kContiguous;
  t.plan.context.method = context_parallel::method_from_string(o.context_method);
  t.plan.memory.recompute = memory::recompute_from(o.recompute);
  t.plan.memory.precision = memory::precision_from(o.precision);
  t.plan.memory.loss_scaling = o.loss_scale == "dynamic" || (o.loss_scale == "auto" && t.plan.memory.precision == memory::Precision::kFp16);
  if (app.count("--stages-per-rank") == 0) t.plan.pipeline.stages_per_rank = train::default_stages_per_rank(t.plan.pipeline.schedule);
  if (o.job.backend == "threads" && app.count("--ranks") == 0) o.job.ranks = t.plan.layout.world_size();
  if (o.job.backend == "threads") at::set_num_threads(1);  // thread ranks already fill the cores

  try {
    const data::Corpus corpus = data::load_corpus(o.data_dir.empty() ? data::default_corpus_folder() : o.data_dir);
    // The plan's rules (train/plan.hpp), once before the ranks start; with
    // --elastic the layout is fitted to the world first, and train() checks that.
    if (!t.checkpoints.elastic) train::plan_for(t, static_cast<int64_t>(corpus.vocab.size())).check();
    memory::check_precision(t.plan.memory.precision, o.job.backend == "nccl" ? c10::DeviceType::CUDA : c10::DeviceType::CPU);
    const data::CorpusSummary summary = data::summarize(corpus);
    if (o.meter_memory) {
      if (o.job.backend == "nccl" || o.job.device == "cuda")
        throw std::runtime_error("--meter-memory counts the CPU's allocations: run on CPU ranks");
      memory::AllocatorMeter::install();  // after the corpus: the run's own tensors from here
    }
    return lessons::run_lesson("lesson_11_capstone", o.job,
                               [&](comm::Communicator& comm) { run(comm, corpus, summary, o, parts); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lesson_11_capstone: %s\n", e.what());
    return 1;
  }
}
