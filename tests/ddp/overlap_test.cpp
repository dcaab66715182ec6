// Overlap really happens: the first bucket's all-reduce starts while
// backward is still computing gradients; and the bucket plan is rebuilt in
// the order gradients became ready.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "comm/threads_backend.hpp"
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
        if (e.rank == rank && e.category == "grad_ready" && e.begin_us <= wait_begin && e.begin_us >= first_bucket_begin - 1000000)
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

}  // namespace
}  // namespace distlab::ddp
