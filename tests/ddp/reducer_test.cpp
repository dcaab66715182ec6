// The reducer's states at the edges of a step: finalize() when there is
// nothing to finish, a backward that stops half way, a gradient hook that
// fires twice, two synchronized backwards between two forwards, a bucket
// ready before an earlier one. Each ends with replicas (or gradients) equal
// to one process's on the whole batch.
#include <gtest/gtest.h>

#include <torch/autograd.h>
#include <torch/csrc/autograd/function_hook.h>

#include <mutex>
#include <stdexcept>
#include <vector>

#include "comm/threads_backend.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp_test_util.hpp"
#include "support/recording.hpp"

namespace distlab::ddp {
namespace {

using namespace testing;
using comm::Communicator;

constexpr int kRanks = 2;
constexpr int64_t kRows = 6;  // per rank and step
constexpr int kSteps = 3;

// The identity whose backward throws: a backward that stops half way, after
// the hooks of the layers behind it have fired.
struct Interrupt : torch::autograd::Function<Interrupt> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    throw std::runtime_error("backward interrupted on purpose");
  }
};

// make_model's forward, optionally with Interrupt after the first layer.
at::Tensor forward(torch::nn::Sequential& model, const at::Tensor& x, bool interrupt = false) {
  at::Tensor h = torch::tanh(model[0]->as<torch::nn::Linear>()->forward(x));
  if (interrupt) h = Interrupt::apply(h);
  h = torch::tanh(model[2]->as<torch::nn::Linear>()->forward(h));
  return model[4]->as<torch::nn::Linear>()->forward(h);
}

// Trains kRanks replicas of make_model for kSteps SGD steps, where
// step(ddp, model, s, x, y) runs forward and backward on the rank's rows of
// step s. Returns each rank's distance to one process on the whole batches.
template <typename Step>
std::vector<double> errors_against_single(Step step, comm::CommOptions comm_options = {}) {
  auto initial = make_model(21);
  const Data data = make_data(kRanks * kRows * kSteps, 17);
  auto single = make_model(0);
  copy_parameters(*initial, *single);
  train_single(single, data, kRanks * kRows, kSteps, Opt::kSgd);
  EXPECT_TRUE(test_support::exceeds(max_difference(*single, *initial), 1e-3));  // the parameters really moved
  std::mutex mutex;
  std::vector<double> errors(kRanks, -1);
  comm::run_thread_ranks(kRanks, [&](Communicator& comm) {
    auto model = make_model(500 + comm.rank());
    if (comm.rank() == 0) copy_parameters(*initial, *model);
    DdpOptions options;
    options.bucket_cap_bytes = 512;  // several buckets
    options.first_bucket_bytes = 256;
    DistributedDataParallel ddp(comm, model.ptr(), options);
    auto optimizer = make_optimizer(*model, Opt::kSgd);
    for (int s = 0; s < kSteps; ++s) {
      const int64_t first = (s * kRanks + comm.rank()) * kRows;
      compat::zero_grad(*optimizer);
      step(ddp, model, s, data.x.narrow(0, first, kRows), data.y.narrow(0, first, kRows));
      optimizer->step();
    }
    std::lock_guard<std::mutex> lock(mutex);
    errors[static_cast<size_t>(comm.rank())] = max_difference(*single, *model);
  }, comm_options);
  return errors;
}

void expect_small(const std::vector<double>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_LT(errors[r], 2e-6) << "rank " << r;
}

// finalize() after the engine's callback has run, and before any backward:
// nothing to finish, nothing sent, the gradients untouched.
TEST(ReducerStates, FinalizeWithNothingPendingIsANoOp) {
  expect_small(errors_against_single([](DistributedDataParallel& ddp, torch::nn::Sequential& model, int s,
                                        const at::Tensor& x, const at::Tensor& y) {
    ddp.reducer().finalize();  // armed, nothing reduced yet
    ddp.forward([&] { return torch::mse_loss(forward(model, x), y); }).backward();
    const ReducerStats before = ddp.stats();
    std::vector<at::Tensor> grads;
    for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
    ddp.reducer().finalize();
    ddp.reducer().finalize();
    EXPECT_EQ(before.synced_steps, s + 1);
    EXPECT_EQ(ddp.stats().synced_steps, before.synced_steps);
    EXPECT_EQ(ddp.stats().all_reduces, before.all_reduces);
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(at::equal(model->parameters()[i].grad(), grads[i]));
  }));
}

// A backward that throws half way leaves the reduction unfinished: the next
// forward says so, finalize() by hand completes it (naming the parameters
// that got no gradient), and the following steps are as if nothing happened.
TEST(ReducerStates, InterruptedBackwardIsNamedAndFinalizeRecovers) {
  expect_small(errors_against_single([](DistributedDataParallel& ddp, torch::nn::Sequential& model, int s,
                                        const at::Tensor& x, const at::Tensor& y) {
    if (s == 0) {
      EXPECT_ANY_THROW(ddp.forward([&] { return torch::mse_loss(forward(model, x, true), y); }).backward());
      try {
        ddp.prepare_forward();
        ADD_FAILURE() << "a forward went ahead of an unfinished reduction";
      } catch (const comm::CommError& e) {
        EXPECT_NE(std::string(e.what()).find("never finished"), std::string::npos) << e.what();
      }
      try {
        ddp.reducer().finalize();
        ADD_FAILURE() << "the first layer's missing gradients went unnamed";
      } catch (const comm::CommError& e) {
        EXPECT_NE(std::string(e.what()).find("'0.weight', '0.bias'"), std::string::npos) << e.what();
      }
      EXPECT_EQ(ddp.stats().synced_steps, 1);
      for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();  // the step is dropped
    }
    ddp.forward([&] { return torch::mse_loss(forward(model, x), y); }).backward();
  }));
}

// A post hook on each gradient accumulator that runs the accumulator's other
// post hooks (DDP's among them) a second time, as a reentrant backward may.
class RunHooksAgain : public torch::autograd::FunctionPostHook {
 public:
  explicit RunHooksAgain(torch::autograd::Node* node) : node_(node) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& inputs) override {
    for (auto& hook : node_->post_hooks())
      if (hook.get() != this) (*hook)(outputs, inputs);
    return outputs;
  }

 private:
  torch::autograd::Node* node_;
};

// Every gradient hook fires twice: each gradient enters its bucket once,
// each bucket is all-reduced once.
TEST(ReducerStates, HookFiringTwiceLaunchesItsBucketOnce) {
  expect_small(errors_against_single([](DistributedDataParallel& ddp, torch::nn::Sequential& model, int s,
                                        const at::Tensor& x, const at::Tensor& y) {
    if (s == 0)  // DDP holds the accumulators (and their hooks) alive
      for (auto& p : model->parameters()) {
        const auto accumulator = torch::autograd::impl::grad_accumulator(p);
        accumulator->add_post_hook(std::make_unique<RunHooksAgain>(accumulator.get()));
      }
    const int64_t before = ddp.stats().all_reduces;
    ddp.forward([&] { return torch::mse_loss(forward(model, x), y); }).backward();
    EXPECT_EQ(ddp.stats().all_reduces - before, static_cast<int64_t>(ddp.bucket_plan().buckets.size()));
  }));
}

// Two synchronized backwards after one forward's set-up (half the rows each,
// .grad summing them as in one process): both are reduced, and the buckets
// are rebuilt once, at the next forward, in the first backward's order.
TEST(ReducerStates, TwoSynchronizedBackwardsThenARebuild) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  std::vector<int> rebuilt_order;  // rank 0's plan from step 1 on
  expect_small(errors_against_single(
      [&](DistributedDataParallel& ddp, torch::nn::Sequential& model, int s, const at::Tensor& x, const at::Tensor& y) {
        ddp.prepare_forward();
        if (s == 1 && ddp.comm().rank() == 0) rebuilt_order = ddp.bucket_plan().order;
        for (int64_t first : {int64_t{0}, kRows / 2}) {
          const at::Tensor xs = x.narrow(0, first, kRows / 2), ys = y.narrow(0, first, kRows / 2);
          (torch::mse_loss(forward(model, xs), ys) / 2).backward();
        }
        EXPECT_EQ(ddp.stats().synced_steps, 2 * (s + 1));
      },
      options));
  int rebuilt = 0;
  std::vector<int> first_order;  // rank 0's grad_ready events of its first backward
  for (const auto& e : sink->events()) {
    rebuilt += e.category == "bucket_plan" && e.arg("rebuilt") == "1";
    if (e.rank == 0 && e.category == "grad_ready" && first_order.size() < 6)
      first_order.push_back(std::stoi(e.arg("param")));
  }
  EXPECT_EQ(rebuilt, kRanks);  // once per rank
  EXPECT_EQ(rebuilt_order, first_order);
}

// Registered last, used first: before the rebuild, the bucket of the layer
// that backward reaches first is the last bucket of the plan.
struct LastRegisteredFirst : torch::nn::Module {
  torch::nn::Linear last = register_module("last", torch::nn::Linear(32, 4));
  torch::nn::Linear first = register_module("first", torch::nn::Linear(8, 32));
  at::Tensor forward(const at::Tensor& x) { return last->forward(torch::tanh(first->forward(x))); }
};

// Bucket 1 (the last layer) is ready before bucket 0: it waits, and every
// rank all-reduces bucket 0 first. The gradients equal one process's.
TEST(ReducerStates, BucketsLaunchInOrderWhenALaterOneIsReadyFirst) {
  torch::manual_seed(5);
  auto reference = std::make_shared<LastRegisteredFirst>();
  const Data data = make_data(kRanks * kRows, 3);
  torch::mse_loss(reference->forward(data.x), data.y).backward();
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  comm::run_thread_ranks(
      kRanks,
      [&](Communicator& comm) {
        auto model = std::make_shared<LastRegisteredFirst>();
        copy_parameters(*reference, *model);
        DdpOptions ddp_options;
        ddp_options.bucket_cap_bytes = 512;
        ddp_options.first_bucket_bytes = 256;
        DistributedDataParallel ddp(comm, model, ddp_options);
        ASSERT_EQ(ddp.bucket_plan().text().find("bucket 0  0.00 MiB  2 params: first.bias first.weight"), 0u)
            << ddp.bucket_plan().text();
        const int64_t first = comm.rank() * kRows;
        const at::Tensor x = data.x.narrow(0, first, kRows), y = data.y.narrow(0, first, kRows);
        ddp.forward([&] { return torch::mse_loss(model->forward(x), y); }).backward();
        auto expected = reference->named_parameters();
        for (const auto& p : model->named_parameters())
          EXPECT_TRUE(at::allclose(p.value().grad(), expected[p.key()].grad(), 1e-5, 1e-7)) << p.key();
      },
      options);
  for (int rank = 0; rank < kRanks; ++rank) {
    std::vector<std::string> ready, launched;  // buckets, in the order of their grad_ready / all-reduce spans
    for (const auto& e : sink->events()) {
      if (e.rank != rank) continue;
      if (e.category == "grad_ready") ready.push_back(e.arg("bucket"));
      if (e.category == "bucket") launched.push_back(e.arg("bucket"));
    }
    ASSERT_FALSE(ready.empty());
    EXPECT_EQ(ready.front(), "1") << "rank " << rank << ": the last bucket was not ready first";
    EXPECT_EQ(launched, (std::vector<std::string>{"0", "1"})) << "rank " << rank;
  }
}

}  // namespace
}  // namespace distlab::ddp
