// Lesson 08: buckets, and communication overlapped with backward.
//
// Backward computes the gradients from the last layer to the first. The
// naive version (lesson 06) waits for all of them, then all-reduces: the
// network idles while backward computes, and backward's cores idle while the
// network works. DistributedDataParallel instead packs gradients into
// buckets (the first 1 MiB, then 25 MiB each, in reverse order of
// registration) and all-reduces a bucket as soon as its last gradient is
// ready, on a communication thread, while backward goes on with the earlier
// layers. After the first step it rebuilds the buckets in the order the
// gradients really became ready.
//
//   1. the bucket plan before and after the rebuild
//   2. one traced step: when each bucket's all-reduce ran, against backward
//   3. the overlap fraction: the share of all-reduce time hidden behind backward
//   4. a sweep of bucket sizes (1, 5, 25, 100 MiB, one bucket per parameter)
//      against the naive version and against no communication at all
//
//   lesson_08_bucketing_overlap --backend threads --ranks 2
//   distlab-run --nproc-per-node 2 -- lesson_08_bucketing_overlap --backend gloo --trace step.json
#include <CLI/CLI.hpp>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compare.hpp"
#include "lesson.hpp"
#include "replicas.hpp"
#include "timing.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp/naive_data_parallel.hpp"
#include "ddp/overlap.hpp"
#include "models/square_mlp.hpp"
#include "trace/recorder.hpp"

using namespace distlab;
using lessons::Data;
using lessons::format_seconds;

namespace {

struct Options {
  comm::JobOptions job;
  int width = 1024;
  int layers = 6;
  int rows = 32;      // per rank per step
  int steps = 3;      // timed steps per sweep row
  int threads = 0;    // intra-op threads per rank; 0 = cores / ranks on this machine
};

// `layers` x Linear(width, width) + ReLU: at the defaults 6.3 M parameters,
// 25.2 MB of gradients (each weight 4 MiB), large enough that all-reducing
// them takes a good part of a step on a CPU.
torch::nn::Sequential make_model(const Options& o) {
  return models::square_mlp(o.layers, o.width, models::Activation::kReLU);
}

// Forward and backward are recorded as spans on the compute lane, so that
// the trace (and part 2 below) shows the buckets against them.
at::Tensor traced_loss(comm::Communicator& comm, torch::nn::Sequential& model, const at::Tensor& x, int64_t step) {
  trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneCompute, "forward", "fwd");
  span.arg("step", step);
  return model->forward(x).pow(2).mean();
}
void traced_backward(comm::Communicator& comm, const at::Tensor& loss, int64_t step) {
  trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneCompute, "backward", "bwd");
  span.arg("step", step);
  loss.backward();  // returns once every bucket is averaged (DDP's wait is inside)
}

// One DDP training step, traced as step `step`: forward, backward (with
// the buckets' all-reduces), SGD.
void ddp_step(comm::Communicator& comm, ddp::DistributedDataParallel& ddp, torch::nn::Sequential& model,
              torch::optim::SGD& sgd, const at::Tensor& x, int64_t step) {
  compat::zero_grad(sgd);
  at::Tensor loss = ddp.forward([&] { return traced_loss(comm, model, x, step); });
  traced_backward(comm, loss, step);
  sgd.step();
}

// Each line of `text` with `indent` in front.
std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    out += indent + text.substr(start, end + 1 - start);
  return out;
}

const trace::Event* find_event(const std::vector<trace::Event>& events, int rank, const char* category, int64_t step) {
  for (const auto& e : events)
    if (e.rank == rank && e.category == category && e.arg("step") == std::to_string(step)) return &e;
  return nullptr;
}

// Part 2: one step of rank `rank` as bars on a common time axis (0 = the
// start of backward), one row per bucket.
void print_timeline(const std::vector<trace::Event>& events, int rank, int64_t step) {
  const trace::Event* backward = find_event(events, rank, "bwd", step);
  const trace::Event* wait = find_event(events, rank, "ddp_wait", step);
  if (backward == nullptr || wait == nullptr) return;
  std::vector<const trace::Event*> buckets;
  for (const auto& e : events)
    if (e.rank == rank && e.category == "bucket" && e.arg("step") == std::to_string(step)) buckets.push_back(&e);
  std::sort(buckets.begin(), buckets.end(), [](auto a, auto b) { return a->begin_us < b->begin_us; });
  const int64_t t0 = backward->begin_us;
  int64_t t1 = backward->end_us;
  for (const auto* b : buckets) t1 = std::max(t1, b->end_us);
  constexpr int kWidth = 56;
  auto bar = [&](int64_t begin, int64_t end, char c) {
    std::string line(kWidth, ' ');
    const double scale = static_cast<double>(kWidth) / static_cast<double>(std::max<int64_t>(1, t1 - t0));
    const int from = std::clamp(static_cast<int>((begin - t0) * scale), 0, kWidth - 1);
    const int to = std::clamp(static_cast<int>((end - t0) * scale), from + 1, kWidth);
    for (int i = from; i < to; ++i) line[static_cast<size_t>(i)] = c;
    return line;
  };
  auto ms = [&](int64_t t) { return static_cast<double>(t - t0) / 1000.0; };
  std::printf("  %-30s |%s| %7.1f .. %7.1f ms\n", "backward computes", bar(t0, wait->begin_us, '=').c_str(), ms(t0),
              ms(wait->begin_us));
  for (const auto* b : buckets) {
    const std::string label = b->name + " (" + lessons::format_megabytes(static_cast<double>(b->bytes)) + ")";
    std::printf("  %-30s |%s| %7.1f .. %7.1f ms\n", label.c_str(), bar(b->begin_us, b->end_us, '#').c_str(),
                ms(b->begin_us), ms(b->end_us));
  }
  std::printf("  %-30s |%s| %7.1f .. %7.1f ms\n", "backward waits for buckets", bar(wait->begin_us, t1, '.').c_str(),
              ms(wait->begin_us), ms(t1));
}

struct SweepRow {
  std::string name;
  int buckets = 0;
  double seconds = 0;   // per step, slowest rank
  ddp::OverlapStats overlap;  // summed over the timed steps (rank 0)
};

// Seconds per call of step(), the slowest rank's, over `steps` calls.
template <typename Step>
double time_steps(comm::Communicator& comm, int steps, Step&& step) {
  return lessons::slowest_rank_seconds(comm, [&] {
           for (int s = 0; s < steps; ++s) step();
         }) /
         steps;
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  const int threads = lessons::share_cores(o.threads);
  // Part 2 reads the trace back in memory: one sink for this process (thread
  // ranks share one recorder, so only rank 0 adds it). With --trace the
  // same events also go to the file.
  auto memory = std::make_shared<trace::MemorySink>();
  if (me == 0) comm.recorder_ptr()->add_sink(memory);
  comm.barrier();

  auto model = make_model(o);
  lessons::fill_from_seed(*model, 500 + static_cast<uint64_t>(me));
  const Data data = lessons::make_data(static_cast<int64_t>(o.rows) * p, o.width, 1, /*seed=*/5);
  const at::Tensor x = data.rows(static_cast<int64_t>(me) * o.rows, o.rows).x;
  int64_t params = 0;
  for (const auto& t : model->parameters()) params += t.numel();
  torch::optim::SGD sgd(model->parameters(), 1e-4);

  if (me == 0) {
    std::printf("Lesson 08: bucketing and overlap  (%s backend, %s, %d intra-op thread(s) per rank)\n",
                comm.backend().c_str(), comm::counted(p, "rank").c_str(), threads);
    std::printf("  model: %d x Linear(%d, %d) + ReLU, %lld parameters, %s of gradients; %d rows per rank\n",
                o.layers, o.width, o.width, static_cast<long long>(params),
                lessons::format_megabytes(static_cast<double>(params) * 4).c_str(), o.rows);
  }

  // ---- 1. The bucket plan, before and after the rebuild ---------------------
  {
    parts.begin(comm, "The bucket plan");
    ddp::DistributedDataParallel ddp(comm, model.ptr());
    if (me == 0)
      std::printf("\n1. The bucket plan before the first step (reverse order of registration; 1 MiB, then "
                  "25 MiB):\n%s",
                  indented(ddp.bucket_plan().text(), "    ").c_str());
    int64_t step = 0;
    auto one_step = [&] { ddp_step(comm, ddp, model, sgd, x, step++); };
    one_step();
    one_step();  // its forward rebuilt the buckets in the order step 0's gradients became ready
    if (me == 0)
      std::printf("\n   after the rebuild (the order gradients became ready in step 0, rank 0's):\n%s",
                  indented(ddp.bucket_plan().text(), "    ").c_str());

    // ---- 2. One traced step ---------------------------------------------------
    parts.begin(comm, "One step from the trace");
    const int64_t traced = step;
    one_step();
    comm.barrier();
    const auto events = me == 0 ? memory->events() : std::vector<trace::Event>();
    if (me == 0) {
      std::printf("\n2. One step from the trace: step %lld on rank 0 (0 = backward starts; '#' = a bucket's "
                  "all-reduce):\n", static_cast<long long>(traced));
      print_timeline(events, comm.world_rank(), traced);
    }

    // ---- 3. Its overlap ---------------------------------------------------------
    parts.begin(comm, "Overlap");
    if (me == 0) {
      const auto overlap = ddp::overlap_of_step(events, comm.world_rank(), traced);
      std::printf("\n3. Overlap: %s of all-reduce in %d buckets, %s of it before backward finished computing:\n"
                  "   overlap fraction %.0f%%; %s exposed (backward waiting for the network)\n",
                  format_seconds(overlap.all_reduce_us * 1e-6).c_str(), overlap.buckets,
                  format_seconds(overlap.hidden_us * 1e-6).c_str(), 100 * overlap.fraction(),
                  format_seconds(overlap.exposed_us * 1e-6).c_str());
      if (!o.job.trace.file.empty())
        std::printf("   the whole run is in the trace file: open it in distlab-viz or https://ui.perfetto.dev\n");
      memory->clear();  // the sweep below numbers its steps from 0 again
    }
  }

  // ---- 4. The bucket-size sweep ----------------------------------------------
  parts.begin(comm, "Bucket sizes");
  if (me == 0)
    std::printf("\n4. Bucket sizes (first bucket 1 MiB), %s each after 2 untimed; all-reduce and\n"
                "   hidden: rank 0's per step, from the trace\n",
                comm::counted(o.steps, "timed step").c_str());
  std::vector<SweepRow> rows;
  const std::vector<std::pair<std::string, int64_t>> caps = {
      {"1 MiB", ddp::kMiB}, {"5 MiB", 5 * ddp::kMiB}, {"25 MiB", 25 * ddp::kMiB}, {"100 MiB", 100 * ddp::kMiB},
      {"one per parameter", 0}};
  int64_t step = 1000;  // span steps of the sweep, apart from parts 1-3
  for (const auto& [name, cap] : caps) {
    ddp::DdpOptions options;
    options.bucket_cap_bytes = cap;
    ddp::DistributedDataParallel ddp(comm, model.ptr(), options);
    auto one_step = [&] { ddp_step(comm, ddp, model, sgd, x, step++); };
    one_step();
    one_step();  // the first step and the rebuild stay out of the timing
    const int64_t first = ddp.stats().synced_steps;
    SweepRow row{name, static_cast<int>(ddp.bucket_plan().buckets.size())};
    row.seconds = time_steps(comm, o.steps, one_step);
    if (me == 0) {
      const auto events = memory->events();
      for (int64_t s = first; s < first + o.steps; ++s) {
        const auto one = ddp::overlap_of_step(events, comm.world_rank(), s);
        row.overlap.buckets = one.buckets;
        row.overlap.all_reduce_us += one.all_reduce_us;
        row.overlap.hidden_us += one.hidden_us;
        row.overlap.exposed_us += one.exposed_us;
      }
      memory->clear();
    }
    rows.push_back(row);
  }
  {
    // The naive version: backward first, then one all-reduce per gradient.
    auto one_step = [&] {
      compat::zero_grad(sgd);
      model->forward(x).pow(2).mean().backward();
      ddp::average_gradients(comm, *model);
      sgd.step();
    };
    one_step();
    rows.push_back({"naive (after backward)", static_cast<int>(model->parameters().size()),
                    time_steps(comm, o.steps, one_step), {}});
    // No communication at all: what the step costs with the network free.
    auto local_step = [&] {
      compat::zero_grad(sgd);
      model->forward(x).pow(2).mean().backward();
      sgd.step();
    };
    rows.push_back({"no communication", 0, time_steps(comm, o.steps, local_step), {}});
  }
  if (me == 0) {
    std::printf("  %-24s %8s %11s %12s %10s %9s %10s\n", "bucket cap", "buckets", "step time", "all-reduce",
                "hidden", "overlap", "exposed");
    for (const auto& r : rows) {
      std::printf("  %-24s %8d %11s", r.name.c_str(), r.buckets, format_seconds(r.seconds).c_str());
      if (r.overlap.buckets > 0)
        std::printf(" %12s %10s %8.0f%% %10s\n", format_seconds(r.overlap.all_reduce_us * 1e-6 / o.steps).c_str(),
                    format_seconds(r.overlap.hidden_us * 1e-6 / o.steps).c_str(), 100 * r.overlap.fraction(),
                    format_seconds(r.overlap.exposed_us * 1e-6 / o.steps).c_str());
      else
        std::printf(" %12s %10s %9s %10s\n", "-", "-", "-", "-");
    }
    std::printf("\n  Look: 'no communication' is the floor; the naive version pays the whole all-reduce on top.\n"
                "  Buckets start all-reducing while backward still computes: the hidden part is saved. Tiny\n"
                "  buckets pay a latency per message; one huge bucket starts only when backward is done.\n"
                "  Ranks that share cores compete for them: the all-reduce (sums, copies) takes cycles from\n"
                "  backward, so on a 2-core machine hidden time is only partly saved time.\n"
                "\nNext: --rows 256 (more compute per byte), --layers 4 --width 2048, --backend gloo under\n"
                "distlab-run --nproc-per-node 2 with --trace step.json; then distlab-bench ddp.\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"The bucket plan", "One step from the trace", "Overlap", "Bucket sizes"});
  CLI::App app{"Lesson 08: DDP buckets, the rebuild, overlap with backward, and a bucket-size sweep"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--width", o.width, "features of each Linear layer")->check(CLI::Range(8, 8192))
      ->capture_default_str();
  app.add_option("--layers", o.layers, "Linear layers")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--rows", o.rows, "rows per rank per step")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps per sweep row")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_08_bucketing_overlap", o.job,
                             [&](comm::Communicator& comm) { run(comm, o, parts); });
}
