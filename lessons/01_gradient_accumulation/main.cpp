// Lesson 01: gradient accumulation.
//
// The slides' house-price model, price = bedrooms*w1 + bathrooms*w2 + b,
// trained with SGD two ways: a step after every item, or a step after the
// gradients of a batch have been summed in .grad (no zero_grad in between).
// The summed gradient is exactly the gradient of the whole batch, and that is
// what makes data parallelism work: part 5 splits the batch across ranks and
// adds their gradients with an all-reduce.
//
//   lesson_01_gradient_accumulation --backend threads --ranks 4
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "house_prices.hpp"
#include "lesson.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"

using namespace distlab;
using lessons::Gradients;
using lessons::House;
using lessons::Params;

namespace {

struct Options {
  comm::JobOptions job;
  int epochs = 10;
  double lr = 1e-3;
  int accumulate = 2;
  // The starting weights, as if initialised at random once.
  double w1 = 0.5, w2 = 1.0, b = 0.2;
};

void print_grads(const char* label, const Gradients& g) {
  std::printf("  %-44s dw1 = %11.6f   dw2 = %11.6f   db = %11.6f\n", label, g.w1, g.w2, g.b);
}

double largest_difference(const Gradients& a, const Gradients& b) {
  return std::max({std::abs(a.w1 - b.w1), std::abs(a.w2 - b.w2), std::abs(a.b - b.b)});
}

void print_params(const char* indent, const Params& p) {
  std::printf("%sw1 = %.6f   w2 = %.6f   b = %.6f\n", indent, lessons::value(p.w1), lessons::value(p.w2),
              lessons::value(p.b));
}

// Parts 1-4 involve no communication: rank 0 shows them, one function each.
std::vector<House> first_two_items() {
  const auto data = lessons::training_data();
  return {data.begin(), data.begin() + 2};
}

void step_after_every_item(const Options& o) {
  std::printf("\n1. A step after every item (the slides' train_no_accumulate), first two items:\n");
  Params p = Params::make(o.w1, o.w2, o.b);
  for (const House& h : first_two_items()) {
    auto y_pred = lessons::predict(p, h);
    auto loss = (y_pred - h.price).pow(2);
    loss.backward();
    std::printf("  item (x1=%g, x2=%g, y=%g): y_pred = %.4f, loss = %.4f\n", h.bedrooms, h.bathrooms, h.price,
                lessons::value(y_pred), lessons::value(loss));
    print_grads("  loss.backward():", lessons::grads_of(p));
    lessons::sgd_step(p, o.lr);
    lessons::zero_grads(p);
    print_params("    optimizer.step(), zero_grad():  ", p);
  }
}

void accumulate_two_items(const Options& o) {
  std::printf("\n2. Accumulate the same two items, one step at the end (train_accumulate, batch 2):\n");
  Params p = Params::make(o.w1, o.w2, o.b);
  lessons::zero_grads(p);
  for (const House& h : first_two_items()) {
    lessons::item_loss(p, h).backward();
    char label[64];
    std::snprintf(label, sizeof label, "  after item (x1=%g, x2=%g) .grad holds:", h.bedrooms, h.bathrooms);
    print_grads(label, lessons::grads_of(p));
  }
  lessons::sgd_step(p, o.lr);
  print_params("    one optimizer.step():  ", p);
  std::printf("  Look: the second .grad is the sum of both items' gradients; w moved once.\n");
}

void accumulated_is_batch_gradient(const Options& o) {
  const auto data = lessons::training_data();
  std::printf("\n3. The accumulated gradient IS the gradient of the whole batch (%zu houses):\n", data.size());
  Params p = Params::make(o.w1, o.w2, o.b);
  const Gradients accumulated = lessons::accumulated_gradient(p, data);
  const Gradients batch = lessons::batch_gradient(p, data);
  print_grads("one backward per item, summed in .grad:", accumulated);
  print_grads("one backward of sum((y_pred - y)^2):", batch);
  std::printf("  largest difference: %.3g  (float64 rounding; a mean loss would be this sum / %zu)\n",
              largest_difference(accumulated, batch), data.size());
}

void train_both_ways(const Options& o) {
  const auto data = lessons::training_data();
  std::printf("\n4. Training both ways: %d epochs on the %zu houses, lr %g; total loss after each epoch\n",
              o.epochs, data.size(), o.lr);
  Params every = Params::make(o.w1, o.w2, o.b), accum = Params::make(o.w1, o.w2, o.b);
  const auto every_losses = lessons::train(every, data, o.epochs, o.lr, 1);
  const auto accum_losses = lessons::train(accum, data, o.epochs, o.lr, o.accumulate);
  const std::string accumulated_title = "accumulate " + std::to_string(o.accumulate);
  std::printf("  %6s %18s %24s\n", "epoch", "step every item", accumulated_title.c_str());
  for (int e = 0; e < o.epochs; ++e)
    std::printf("  %6d %18.4f %24.4f\n", e + 1, every_losses[e], accum_losses[e]);
  print_params("  every item:    ", every);
  print_params("  accumulated:   ", accum);
  std::printf("  Look: both learn; accumulation takes %zu steps per epoch instead of %zu, each on a bigger batch.\n",
              (data.size() + o.accumulate - 1) / o.accumulate, data.size());
}

// Part 5: each rank accumulates the gradient of its share of the batch; the
// sum over ranks is the whole batch's gradient again.
void across_ranks(comm::Communicator& comm, const Options& o) {
  const auto data = lessons::training_data();
  const int p = comm.size(), me = comm.rank();
  const std::vector<House> mine = lessons::share_of(data, me, p);

  Params params = Params::make(o.w1, o.w2, o.b);
  const Gradients local = lessons::accumulated_gradient(params, mine);

  // Row `me` of a (p, 3) table holds this rank's gradient, the other rows
  // zeros; the all-reduce sums the tables, so every rank ends up with every
  // rank's row (to print) and their column sums (the gradient DDP would use).
  auto table = torch::zeros({p, 3}, torch::kFloat64);
  table[me] = torch::tensor({local.w1, local.w2, local.b}, torch::kFloat64);
  table = table.to(comm.device());  // nccl moves GPU tensors only
  comm.native_all_reduce(table);
  table = table.cpu();
  auto sum = table.sum(0);
  const Gradients summed{sum[0].item<double>(), sum[1].item<double>(), sum[2].item<double>()};

  if (me != 0) return;
  std::printf("\n5. The batch split across the ranks (%d, %s backend): each accumulates its share, an all-reduce "
              "adds\n", p, comm.backend().c_str());
  for (int r = 0; r < p; ++r) {
    std::string label = "rank " + std::to_string(r) + " (houses";
    for (size_t i = r; i < data.size(); i += p) label += " " + std::to_string(i + 1);
    label += r < static_cast<int>(data.size()) ? "):" : " none):";
    print_grads(label.c_str(), {table[r][0].item<double>(), table[r][1].item<double>(), table[r][2].item<double>()});
  }
  print_grads("sum over ranks (all-reduce):", summed);
  Params whole = Params::make(o.w1, o.w2, o.b);
  const Gradients batch = lessons::batch_gradient(whole, data);
  print_grads("whole batch on one process:", batch);
  std::printf("  largest difference: %.3g\n", largest_difference(summed, batch));
  std::printf("  Look: same gradient, same step, whoever computed which items. That is data parallelism.\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"A step after every item", "Accumulate the same two items",
                        "The accumulated gradient IS the gradient of the whole batch", "Training both ways",
                        "The batch split across the ranks"});
  CLI::App app{"Lesson 01: gradient accumulation (the slides' house-price regression)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--epochs", o.epochs, "epochs of part 4")->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--accumulate", o.accumulate, "items whose gradients are summed before each step (batch size)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return lessons::run_lesson("lesson_01_gradient_accumulation", o.job, [&](comm::Communicator& comm) {
    const bool rank0 = comm.rank() == 0;
    if (rank0) {
      std::printf("Lesson 01: gradient accumulation  (%s backend, %s)\n", comm.backend().c_str(),
                  comm::counted(comm.size(), "rank").c_str());
      std::printf("Model: price = bedrooms*w1 + bathrooms*w2 + b; loss = (price_pred - price)^2; SGD lr %g\n", o.lr);
      print_params("Start: ", Params::make(o.w1, o.w2, o.b));
    }
    // Parts 1-4: rank 0 alone; the others only keep step with it.
    parts.begin(comm, "A step after every item");
    if (rank0) step_after_every_item(o);
    parts.begin(comm, "Accumulate the same two items");
    if (rank0) accumulate_two_items(o);
    parts.begin(comm, "The accumulated gradient IS the gradient of the whole batch");
    if (rank0) accumulated_is_batch_gradient(o);
    parts.begin(comm, "Training both ways");
    if (rank0) train_both_ways(o);
    parts.begin(comm, "The batch split across the ranks");
    across_ranks(comm, o);
    if (rank0)
      std::printf("\nNext: --accumulate 4 (fewer, larger steps), --ranks 8 (one house per rank), then lesson 02:\n"
                  "how the gradients get from rank to rank.\n");
  });
}
