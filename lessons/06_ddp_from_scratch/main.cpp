// Lesson 06: distributed data parallel, from scratch.
//
// The slides' five steps, written out here on a small model:
//   1. rank 0's initial weights go to every rank (broadcast, lesson 03);
//   2. each rank runs forward and backward on its own share of the batch;
//   3. the gradients are summed across ranks (all-reduce, lesson 05) and
//      divided by the number of ranks: every rank holds the gradient of the
//      whole batch's mean loss;
//   4. each rank's optimizer steps with that gradient: the replicas stay equal;
//   5. repeat.
// Then the same from the library: the naive version (ddp::broadcast_parameters
// + ddp::average_gradients, one all-reduce per gradient after backward) and
// ddp::DistributedDataParallel (buckets all-reduced while backward runs).
// All three must end where one process trained on the whole batch ends.
//
//   lesson_06_ddp_from_scratch --backend threads --ranks 4
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "lesson.hpp"
#include "over_ranks.hpp"
#include "replicas.hpp"
#include "collectives/collectives.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp/naive_data_parallel.hpp"

using namespace distlab;
using lessons::Data;

namespace {

struct Options {
  comm::JobOptions job;
  int steps = 5;
  int rows_per_rank = 4;
  double lr = 0.1;
  std::string algorithm = "ring";
  double tolerance = 1e-5;  // float32 rounding: the sums are added in another order
};

// (rows, 8) -> (rows, 4): 1,476 parameters.
torch::nn::Sequential make_model() {
  return torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Linear(32, 32),
                               torch::nn::Tanh(), torch::nn::Linear(32, 4));
}

// Every rank initialises its own model differently, as separate processes
// would; only the broadcast makes them equal.
uint64_t seed_of(int rank) { return 1000 + static_cast<uint64_t>(rank); }

at::Tensor loss_of(torch::nn::Sequential& model, const Data& d) {
  return torch::nn::functional::mse_loss(model->forward(d.x), d.y);
}

// The rows of step s that rank r trains on: the step's batch is
// rows_per_rank * p rows, cut into p equal shares (ddp::DistributedSampler
// deals out shuffled indices instead, as PyTorch's does).
Data share_of(const Data& all, int step, int rank, int p, int rows_per_rank) {
  return all.rows(static_cast<int64_t>(step) * rows_per_rank * p + static_cast<int64_t>(rank) * rows_per_rank,
                  rows_per_rank);
}

void print_losses(comm::Communicator& comm, const std::vector<double>& mine, const std::vector<double>& reference) {
  for (size_t s = 0; s < mine.size(); ++s) {
    const double mean = lessons::mean_over_ranks(comm, mine[s]);
    if (comm.rank() == 0)
      std::printf("    step %zu: mean of the ranks' losses %.6f   one process, whole batch %.6f\n", s + 1, mean,
                  reference[s]);
  }
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  const auto algorithm = collectives::parse_algorithm(o.algorithm);
  const int64_t batch = static_cast<int64_t>(o.rows_per_rank) * p;
  const Data data = lessons::make_data(batch * o.steps, 8, 4, /*seed=*/7);

  if (me == 0) {
    std::printf("Lesson 06: DDP from scratch  (%s backend, %s)\n", comm.backend().c_str(),
                comm::counted(p, "rank").c_str());
    std::printf("  model 8 -> 32 -> 32 -> 4 (tanh), 1,476 parameters, MSE loss, SGD lr %g\n", o.lr);
    std::printf("  %s; each step's batch is %lld rows, %d per rank\n", comm::counted(o.steps, "step").c_str(),
                static_cast<long long>(batch),
                o.rows_per_rank);
  }

  // The reference: one process, the whole batch, rank 0's initial weights.
  // Every rank computes it (it is small) to compare against it locally.
  parts.begin(comm, "The reference");
  auto reference = make_model();
  lessons::fill_from_seed(*reference, seed_of(0));
  std::vector<double> reference_loss;
  {
    torch::optim::SGD sgd(reference->parameters(), o.lr);
    for (int s = 0; s < o.steps; ++s) {
      compat::zero_grad(sgd);
      at::Tensor loss = loss_of(reference, data.rows(s * batch, batch));
      loss.backward();
      sgd.step();
      reference_loss.push_back(loss.item<double>());
    }
  }
  if (me == 0)
    std::printf("\n0. The reference: one process trains on the whole %lld-row batch of every step.\n",
                static_cast<long long>(batch));

  // ---- 1. The five steps, by hand ------------------------------------------
  parts.begin(comm, "From scratch");
  auto scratch = make_model();
  lessons::fill_from_seed(*scratch, seed_of(me));
  const double before = scratch->parameters()[0].sum().item<double>();
  {
    // Step 1: rank 0's weights into everybody's (lesson 03's tree broadcast).
    torch::NoGradGuard no_grad;  // in-place writes into leaves that require grad
    for (auto& param : scratch->parameters()) collectives::broadcast(comm, param, 0, collectives::Algorithm::kTree);
  }
  const double after = scratch->parameters()[0].sum().item<double>();
  const auto befores = lessons::one_per_rank(comm, before), afters = lessons::one_per_rank(comm, after);
  if (me == 0) {
    std::printf("\n1. From scratch, the slides' five steps written out in this file\n");
    std::printf("  step 1, broadcast: sum of the first layer's weight on each rank\n");
    std::printf("    rank   before     after\n");
    for (int r = 0; r < p; ++r) std::printf("    %4d %9.5f %9.5f\n", r, befores[static_cast<size_t>(r)],
                                            afters[static_cast<size_t>(r)]);
    std::printf("  steps 2-5, with the %s all-reduce of lesson 05:\n", collectives::to_string(algorithm));
  }
  std::vector<double> losses;
  torch::optim::SGD scratch_sgd(scratch->parameters(), o.lr);
  for (int s = 0; s < o.steps; ++s) {
    compat::zero_grad(scratch_sgd);
    // Step 2: forward and backward on this rank's share only.
    at::Tensor loss = loss_of(scratch, share_of(data, s, me, p, o.rows_per_rank));
    loss.backward();
    // Step 3: sum every gradient over the ranks, then divide: the mean of
    // p equal shares' mean losses is the whole batch's mean loss, so this
    // is the gradient the reference computes.
    for (auto& param : scratch->parameters()) {
      collectives::all_reduce(comm, param.mutable_grad(), comm::ReduceOp::kSum, algorithm);
      param.mutable_grad().div_(p);
    }
    // Step 4: every rank steps with the same gradient from the same weights.
    scratch_sgd.step();
    losses.push_back(loss.item<double>());
  }  // Step 5: repeat.
  print_losses(comm, losses, reference_loss);

  // ---- 2. The naive version, from the library -------------------------------
  parts.begin(comm, "The naive version from the library");
  auto naive = make_model();
  lessons::fill_from_seed(*naive, seed_of(me));
  ddp::broadcast_parameters(comm, *naive);
  torch::optim::SGD naive_sgd(naive->parameters(), o.lr);
  for (int s = 0; s < o.steps; ++s) {
    compat::zero_grad(naive_sgd);
    loss_of(naive, share_of(data, s, me, p, o.rows_per_rank)).backward();
    ddp::average_gradients(comm, *naive, algorithm);
    naive_sgd.step();
  }
  if (me == 0)
    std::printf("\n2. The naive version from the library: ddp::broadcast_parameters, then after every\n"
                "   backward ddp::average_gradients (one all-reduce per gradient, after backward)\n");

  // ---- 3. The library's DistributedDataParallel -----------------------------
  parts.begin(comm, "ddp::DistributedDataParallel");
  auto model = make_model();
  lessons::fill_from_seed(*model, seed_of(me));
  ddp::DdpOptions ddp_options;
  ddp_options.algorithm = algorithm;
  ddp::DistributedDataParallel ddp(comm, model.ptr(), ddp_options);  // step 1 happens here
  torch::optim::SGD sgd(model->parameters(), o.lr);
  losses.clear();
  for (int s = 0; s < o.steps; ++s) {
    compat::zero_grad(sgd);
    at::Tensor loss = ddp.forward([&] { return loss_of(model, share_of(data, s, me, p, o.rows_per_rank)); });
    loss.backward();  // returns with the averaged gradients in .grad
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  if (me == 0)
    std::printf("\n3. ddp::DistributedDataParallel: gradients all-reduced in buckets while backward runs\n"
                "   (%zu bucket(s) here: the model is 5.9 KB, under the first bucket's 1 MiB)\n",
                ddp.bucket_plan().buckets.size());
  print_losses(comm, losses, reference_loss);

  // ---- 4. The check ----------------------------------------------------------
  parts.begin(comm, "The check");
  struct Row {
    const char* name;
    torch::nn::Module* model;
  };
  const std::vector<Row> rows = {{"from scratch", scratch.ptr().get()},
                                 {"naive (library)", naive.ptr().get()},
                                 {"DistributedDataParallel", model.ptr().get()}};
  bool all_equal = true;
  if (me == 0)
    std::printf("\n4. The check after %s: largest difference of any parameter (float32 rounding: < %g)\n",
                comm::counted(o.steps, "step").c_str(), o.tolerance);
  for (const Row& row : rows) {
    const double vs_reference = lessons::max_over_ranks(comm, lessons::largest_difference(*row.model, *reference));
    const double across = lessons::largest_difference_across_ranks(comm, *row.model);
    const bool ok = vs_reference < o.tolerance && across < o.tolerance;
    all_equal = all_equal && ok;
    if (me == 0)
      std::printf("  %-24s against one process: largest difference %.3g   across ranks: %.3g   %s\n", row.name,
                  vs_reference, across, ok ? "OK" : "DIFFERENT");
  }
  if (!all_equal)
    throw std::runtime_error("the replicas did not end equal to one process on the whole batch (see above)");
  if (me == 0)
    std::printf("\n  Look: p ranks with %d rows each take the same steps as one process with %lld rows.\n"
                "  The differences are float32 rounding: the ranks' gradients are added in another order.\n"
                "\nNext: --ranks 3 --rows-per-rank 5, --algorithm halving_doubling, --backend gloo under\n"
                "distlab-run --nproc-per-node 2; then lesson 07 (no_sync).\n",
                o.rows_per_rank, static_cast<long long>(batch));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"The reference", "From scratch", "The naive version from the library",
                        "ddp::DistributedDataParallel", "The check"},
                       /*first_number=*/0);
  CLI::App app{"Lesson 06: DDP from scratch (five steps by hand, the naive version, DistributedDataParallel)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--steps", o.steps, "training steps")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--rows-per-rank", o.rows_per_rank, "rows of each step's batch per rank")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--algorithm", o.algorithm, "all-reduce: native, reduce_broadcast, ring or halving_doubling")
      ->check(CLI::IsMember({"native", "reduce_broadcast", "ring", "halving_doubling"}))->capture_default_str();
  app.add_option("--tolerance", o.tolerance, "largest difference accepted as float32 rounding")
      ->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_06_ddp_from_scratch", o.job,
                             [&](comm::Communicator& comm) { run(comm, o, parts); });
}
