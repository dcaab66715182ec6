// Lesson 07: gradient accumulation in DDP, and no_sync.
//
// Lesson 01 summed the gradients of k micro-batches in .grad and stepped
// once: the same step as one batch k times larger. Under DDP every backward
// also all-reduces, so k micro-steps cost k all-reduces, although only the
// sum of the k is needed. Inside ddp.no_sync() a backward leaves its
// gradients in .grad and sends nothing; the first backward outside it
// all-reduces the accumulated sum: one all-reduce per k micro-steps.
//
//   for (int m = 0; m < k; ++m) {
//     if (m < k - 1) { auto guard = ddp.no_sync(); ddp.forward(loss).backward(); }
//     else ddp.forward(loss).backward();   // all-reduces the sum of k
//   }
//   optimizer.step();
//
// The lesson trains with and without no_sync (taking turns, step by step),
// checks both against one process stepping on the k-fold batch, and counts
// the bytes and the time.
//
//   lesson_07_no_sync --backend threads --ranks 4 --accumulate 4
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "compare.hpp"
#include "lesson.hpp"
#include "replicas.hpp"
#include "timing.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"

using namespace distlab;
using lessons::Data;

namespace {

struct Options {
  comm::JobOptions job;
  int accumulate = 4;  // k micro-steps per optimizer step
  int steps = 4;
  int rows = 8;        // one micro-batch on one rank
  double lr = 0.05;
  double tolerance = 1e-5;
  int threads = 0;     // intra-op threads per rank; 0 = cores / ranks on this machine
};

constexpr int64_t kIn = 128, kHidden = 512, kOut = 16;

// (rows, 128) -> (rows, 16): 336,912 parameters, 1.35 MB of gradients.
torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Linear(kIn, kHidden), torch::nn::Tanh(),
                               torch::nn::Linear(kHidden, kHidden), torch::nn::Tanh(),
                               torch::nn::Linear(kHidden, kOut));
}

at::Tensor loss_of(torch::nn::Sequential& model, const Data& d) {
  return torch::nn::functional::mse_loss(model->forward(d.x), d.y);
}

struct Run {
  ddp::ReducerStats stats;
  double seconds = 0;  // summed over the steps, each the slowest rank's
  double vs_reference = 0, across = 0;
};

// One of the two ways to train: its own replica of the model, its own DDP.
// Step s, micro-step m, rank r takes rows s*k*p*b + m*p*b + r*b ... + b: the
// k micro-batches of all ranks together are the reference's batch of step s.
class Trainer {
 public:
  Trainer(comm::Communicator& comm, const Options& o, const Data& data, bool use_no_sync)
      : comm_(comm), o_(o), data_(data), use_no_sync_(use_no_sync), model_(make_model()) {
    lessons::fill_from_seed(*model_, 100 + static_cast<uint64_t>(comm.rank()));
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(comm, model_.ptr());
    sgd_ = std::make_unique<torch::optim::SGD>(model_->parameters(), o.lr);
  }

  // One optimizer step of k micro-steps; returns the slowest rank's seconds.
  double step(int s) {
    const int k = o_.accumulate;
    return lessons::slowest_rank_seconds(comm_, [&] {
      compat::zero_grad(*sgd_);
      for (int m = 0; m < k - 1; ++m) {
        if (use_no_sync_) {
          auto guard = ddp_->no_sync();  // this backward only adds into .grad
          micro_step(s, m);
        } else {
          micro_step(s, m);              // this backward all-reduces as well
        }
      }
      micro_step(s, k - 1);              // always synchronizes: the sum of all k
      sgd_->step();
    });
  }

  Run result(torch::nn::Sequential& reference, double seconds) {
    Run run;
    run.stats = ddp_->stats();
    run.seconds = seconds;
    run.vs_reference = lessons::max_over_ranks(comm_, lessons::largest_difference(*model_, *reference));
    run.across = lessons::largest_difference_across_ranks(comm_, *model_);
    return run;
  }

 private:
  void micro_step(int s, int m) {
    const int p = comm_.size(), k = o_.accumulate, b = o_.rows;
    const Data d =
        data_.rows((static_cast<int64_t>(s) * k + m) * p * b + static_cast<int64_t>(comm_.rank()) * b, b);
    // Divided by k: the k micro-losses add up to the mean over k*b rows.
    ddp_->forward([&] { return loss_of(model_, d) / k; }).backward();
  }

  comm::Communicator& comm_;
  const Options& o_;
  const Data& data_;
  bool use_no_sync_;
  torch::nn::Sequential model_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<torch::optim::SGD> sgd_;
};

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank(), k = o.accumulate;
  const int64_t big_batch = static_cast<int64_t>(k) * p * o.rows;
  const Data data = lessons::make_data(big_batch * o.steps, kIn, kOut, /*seed=*/11);
  const int64_t grad_bytes = [] {
    int64_t n = 0;
    for (const auto& t : make_model()->parameters()) n += t.numel();
    return n * 4;
  }();

  const int threads = lessons::share_cores(o.threads);
  if (me == 0) {
    std::printf("Lesson 07: no_sync  (%s backend, %s, %d intra-op thread(s) per rank)\n",
                comm.backend().c_str(), comm::counted(p, "rank").c_str(), threads);
    std::printf("  model 128 -> 512 -> 512 -> 16, %s of float32 gradients; SGD lr %g\n",
                lessons::format_megabytes(static_cast<double>(grad_bytes)).c_str(), o.lr);
    std::printf("  %s of k = %d micro-steps, %d rows per micro-step per rank\n",
                comm::counted(o.steps, "optimizer step").c_str(), k, o.rows);
  }
  parts.begin(comm, "The reference");
  if (me == 0)
    std::printf("\n0. The reference: one process, one step per %lld-row batch (k x ranks x rows)\n",
                static_cast<long long>(big_batch));
  auto reference = make_model();
  lessons::fill_from_seed(*reference, 100);  // rank 0's weights
  torch::optim::SGD sgd(reference->parameters(), o.lr);
  for (int s = 0; s < o.steps; ++s) {
    compat::zero_grad(sgd);
    loss_of(reference, data.rows(s * big_batch, big_batch)).backward();
    sgd.step();
  }

  // The two take turns step by step, so that other load on the machine
  // slows both alike.
  parts.begin(comm, "Without and with no_sync");
  Trainer every_step(comm, o, data, /*use_no_sync=*/false), with_no_sync(comm, o, data, /*use_no_sync=*/true);
  double seconds_synced = 0, seconds_local = 0;
  for (int s = 0; s < o.steps; ++s) {
    seconds_synced += every_step.step(s);
    seconds_local += with_no_sync.step(s);
  }
  const Run synced = every_step.result(reference, seconds_synced);
  const Run local = with_no_sync.result(reference, seconds_local);

  if (me == 0) {
    std::printf("\n1. Without and with no_sync, taking turns step by step: every micro-step synchronizes, or\n"
                "   micro-steps 1..k-1 under ddp.no_sync()\n");
    std::printf("  %-26s %10s %10s %14s %12s %12s %14s %12s\n", "", "backwards", "synced", "all-reduces",
                "bytes/rank", "time/step", "vs 1 process", "across ranks");
    auto row = [&](const char* name, const Run& r) {
      std::printf("  %-26s %10lld %10lld %14lld %12s %12s %14.3g %12.3g\n", name,
                  static_cast<long long>(r.stats.synced_steps + r.stats.local_steps),
                  static_cast<long long>(r.stats.synced_steps), static_cast<long long>(r.stats.all_reduces),
                  lessons::format_megabytes(static_cast<double>(r.stats.bytes)).c_str(),
                  lessons::format_seconds(r.seconds / o.steps).c_str(), r.vs_reference, r.across);
    };
    row("without no_sync", synced);
    row("with no_sync", local);
    std::printf("  bytes: with no_sync %s x %s = %s; without, k = %d times as many\n",
                comm::counted(o.steps, "step").c_str(),
                lessons::format_megabytes(static_cast<double>(grad_bytes)).c_str(),
                lessons::format_megabytes(static_cast<double>(grad_bytes) * o.steps).c_str(), k);
  }

  parts.begin(comm, "The check");
  bool ok = true;
  for (const Run* r : {&synced, &local})
    ok = ok && r->vs_reference < o.tolerance && r->across < o.tolerance;
  // The bytes are a count, not a measurement: exact.
  ok = ok && local.stats.bytes == grad_bytes * o.steps && synced.stats.bytes == grad_bytes * o.steps * k;
  if (me == 0)
    std::printf("\n2. The check: both equal one process on the k-fold batch (largest difference < %g), bytes\n"
                "   as counted above: %s\n",
                o.tolerance, ok ? "OK" : "WRONG");
  if (!ok) throw std::runtime_error("no_sync training differs from one process on the k-fold batch (see above)");
  if (me == 0)
    std::printf("\n  Look: the same weights either way; no_sync sends 1/k of the bytes. The time saved is the\n"
                "  all-reduce of k-1 micro-steps; with thread ranks sharing two cores it is small, with gloo\n"
                "  processes or a real network it is most of the step.\n"
                "\nNext: --accumulate 8, --ranks 2, --backend gloo under distlab-run --nproc-per-node 2;\n"
                "then lesson 08 (buckets and overlap).\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"The reference", "Without and with no_sync", "The check"}, /*first_number=*/0);
  CLI::App app{"Lesson 07: gradient accumulation in DDP with no_sync (one all-reduce per k micro-steps)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--accumulate,-k", o.accumulate, "micro-steps per optimizer step")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--steps", o.steps, "optimizer steps")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--rows", o.rows, "rows per micro-step per rank")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--tolerance", o.tolerance, "largest difference accepted as float32 rounding")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_07_no_sync", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
