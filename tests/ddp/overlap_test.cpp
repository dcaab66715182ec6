// Overlap really happens: the first bucket's all-reduce starts while
// backward is still computing gradients; and the bucket plan is rebuilt in
// the order gradients became ready. Without overlap (DdpOptions::overlap
// false) no bucket starts before the last gradient is computed, and the
// gradients are the same bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "comm/threads_backend.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp/overlap.hpp"
#include "ddp_test_util.hpp"
#include "trace/recorder.hpp"
#include "support/recording.hpp"

namespace distlab::ddp {
namespace {

using comm::Communicator;

// Six 256x256 layers: each weight is 256 KiB, so a cap of 200 KB closes a
// bucket at every weight: one layer (bias and weight) per bucket, and backward through the earlier layers takes
// long enough to be seen beside the later buckets' all-reduces.
torch::nn::Sequential deep_model() {
  torch::manual_seed(3);
  torch::nn::Sequential m;
  for (int i = 0; i < 6; ++i) {
    m->push_back(torch::nn::Linear(256, 256));
    m->push_back(torch::nn::Tanh());
  }
  return m;
}

std::vector<trace::Event> traced_steps(int steps, std::vector<BucketPlan>* plans = nullptr) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  std::mutex mutex;
  comm::run_thread_ranks(
      2,
      [&](Communicator& comm) {
        auto model = deep_model();
        DdpOptions ddp_options;
        ddp_options.bucket_cap_bytes = 200 * 1000;
        ddp_options.first_bucket_bytes = 200 * 1000;
        DistributedDataParallel ddp(comm, model.ptr(), ddp_options);
        auto x = at::randn({512, 256});
        for (int s = 0; s < steps; ++s) {
          if (plans != nullptr && comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            plans->push_back(ddp.bucket_plan());
          }
          ddp.forward([&] { return model->forward(x).pow(2).mean(); }).backward();
        }
      },
      options);
  return sink->events();
}

TEST(Overlap, FirstBucketStartsBeforeTheLastGradientIsComputed) {
  const auto events = traced_steps(2);
  for (int rank = 0; rank < 2; ++rank)
    for (int64_t step = 0; step < 2; ++step) {
      const std::string s = std::to_string(step);
      int64_t first_bucket_begin = -1, last_grad = -1;
      for (const auto& e : events) {
        if (e.rank != rank) continue;
        if (e.category == "bucket" && e.arg("step") == s && e.arg("bucket") == "0") first_bucket_begin = e.begin_us;
      }
      // grad_ready events carry no step: take those between this step's
      // first bucket and its wait.
      int64_t wait_begin = -1;
      for (const auto& e : events)
        if (e.rank == rank && e.category == "ddp_wait" && e.arg("step") == s) wait_begin = e.begin_us;
      for (const auto& e : events)
        if (e.rank == rank && e.category == "grad_ready" && e.begin_us <= wait_begin &&
            e.begin_us >= first_bucket_begin - 1000000)
          last_grad = std::max(last_grad, e.begin_us);
      ASSERT_GE(first_bucket_begin, 0);
      EXPECT_LT(first_bucket_begin, last_grad) << "rank " << rank << " step " << step;

      // The overlap arithmetic, checked against a sum done here.
      const OverlapStats stats = overlap_of_step(events, rank, step);
      int64_t total = 0, hidden = 0;
      for (const auto& e : events)
        if (e.rank == rank && e.category == "bucket" && e.arg("step") == s) {
          total += e.end_us - e.begin_us;
          hidden += std::max<int64_t>(0, std::min(e.end_us, wait_begin) - e.begin_us);
        }
      EXPECT_EQ(stats.all_reduce_us, total);
      EXPECT_EQ(stats.hidden_us, hidden);
      EXPECT_GT(stats.hidden_us, 0);
      EXPECT_GE(stats.buckets, 6);
    }
}

TEST(Overlap, BucketsAreRebuiltInTheOrderGradientsBecameReady) {
  std::vector<BucketPlan> plans;
  const auto events = traced_steps(3, &plans);
  ASSERT_EQ(plans.size(), 3u);
  // Step 0: reverse registration order. Steps 1 and 2: the rebuilt plan,
  // whose order is the order of rank 0's grad_ready events in step 0.
  EXPECT_EQ(plans[0].order, reverse_registration_order(12));
  // Events are stored in the order they were recorded: rank 0's grad_ready
  // events before its first ddp_wait are step 0's, in the order they fired.
  std::vector<int> order;
  for (const auto& e : events) {
    if (e.rank != 0) continue;
    if (e.category == "ddp_wait") break;
    if (e.category == "grad_ready") order.push_back(std::stoi(e.arg("param")));
  }
  EXPECT_EQ(plans[1].order, order);
  EXPECT_EQ(plans[2].order, order);
  int rebuilt = 0;
  for (const auto& e : events) rebuilt += e.category == "bucket_plan" && e.arg("rebuilt") == "1";
  EXPECT_EQ(rebuilt, 2);  // once per rank
}

// How many buckets had been launched when the backward computed the
// gradient of the first layer's weight (the last one it computes), and
// every rank's gradients after two steps.
struct LaunchesSeen {
  std::vector<int64_t> before_last_gradient;   // per rank and step
  std::vector<int64_t> per_step;               // buckets launched per step
  std::vector<std::vector<at::Tensor>> grads;  // per rank
};

LaunchesSeen launches_seen(bool overlap) {
  LaunchesSeen seen;
  seen.grads.resize(2);
  std::mutex mutex;
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    torch::nn::Sequential model{nullptr};
    {
      std::lock_guard<std::mutex> lock(mutex);  // torch's default generator is the ranks' one
      model = deep_model();
    }
    DdpOptions options;
    options.bucket_cap_bytes = 200 * 1000;
    options.first_bucket_bytes = 200 * 1000;
    options.overlap = overlap;
    DistributedDataParallel ddp(comm, model.ptr(), options);
    // A generator of its own: thread ranks share torch's default one.
    auto x =
        at::randn({64, 256}, at::detail::createCPUGenerator(10 + comm.rank()), at::TensorOptions().dtype(at::kFloat));
    int64_t at_step_start = 0;
    auto first_weight = model->named_parameters()["0.weight"];
    first_weight.register_hook([&](const at::Tensor& g) {
      std::lock_guard<std::mutex> lock(mutex);
      seen.before_last_gradient.push_back(ddp.stats().all_reduces - at_step_start);
      return g;
    });
    for (int s = 0; s < 2; ++s) {
      at_step_start = ddp.stats().all_reduces;
      compat::zero_grad(*model);
      ddp.forward([&] { return model->forward(x).pow(2).mean(); }).backward();
      std::lock_guard<std::mutex> lock(mutex);
      seen.per_step.push_back(ddp.stats().all_reduces - at_step_start);
    }
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& p : model->parameters()) seen.grads[comm.rank()].push_back(p.grad().clone());
  });
  return seen;
}

TEST(Overlap, WithoutOverlapNoBucketStartsBeforeTheLastGradient) {
  const LaunchesSeen with = launches_seen(true), without = launches_seen(false);
  ASSERT_EQ(with.before_last_gradient.size(), 4u);  // 2 ranks x 2 steps
  ASSERT_EQ(without.before_last_gradient.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_GE(with.per_step[k], 6) << k;
    EXPECT_EQ(without.per_step[k], with.per_step[k]) << k;
    // Overlapped, the later layers' buckets were out before the first
    // layer's weight had its gradient; without overlap none was.
    EXPECT_GT(with.before_last_gradient[k], 0) << k;
    EXPECT_EQ(without.before_last_gradient[k], 0) << k;
  }
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(with.grads[rank].size(), without.grads[rank].size());
    for (size_t i = 0; i < with.grads[rank].size(); ++i)
      EXPECT_TRUE(at::equal(with.grads[rank][i], without.grads[rank][i])) << "rank " << rank << " parameter " << i;
  }
  // The all-reduce happened: the ranks' inputs differ, their gradients agree.
  for (size_t i = 0; i < without.grads[0].size(); ++i)
    EXPECT_TRUE(at::equal(without.grads[0][i], without.grads[1][i])) << "parameter " << i;
}

}  // namespace
}  // namespace distlab::ddp
