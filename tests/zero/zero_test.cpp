// ZeRO on thread ranks: equal to one process and to DDP (zero_checks.hpp)
// on 2, 3 and 4 ranks and on a group; what ZeRO-2 keeps and drops; the
// trace events a timeline draws; ZeRO-2's overlap with backward.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <iostream>
#include <map>
#include <mutex>
#include <string>

#include "collectives/plan.hpp"
#include "comm/threads_backend.hpp"
#include "compat/torch.hpp"
#include "flight/recorder.hpp"
#include "models/square_mlp.hpp"
#include "trace/recorder.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero_checks.hpp"
#include "support/recording.hpp"

namespace distlab::zero {
namespace {

using comm::Communicator;

void expect_clean(const std::vector<testing::Report>& reports, const std::string& what) {
  for (size_t r = 0; r < reports.size(); ++r) {
    for (const auto& f : reports[r].failures) ADD_FAILURE() << f;
    EXPECT_GT(reports[r].runs, 0);
    std::cout << what << ", rank " << r << ": " << reports[r].runs << " runs, max difference "
              << reports[r].worst_vs_single << " from one process, " << reports[r].worst_vs_ddp << " from DDP"
              << std::endl;
  }
}

TEST(ZeroEqualsReferences, TwoThreeAndFourThreadRanks) {
  for (int ranks : {2, 3, 4}) {
    std::vector<testing::Report> reports(static_cast<size_t>(ranks));
    comm::run_thread_ranks(ranks, [&](Communicator& comm) {
      reports[static_cast<size_t>(comm.rank())] = testing::check_against_references(comm);
    });
    expect_clean(reports, std::to_string(ranks) + " ranks");
  }
}

// World ranks 1, 2, 3 form a group of 3 (its rank 0 is world rank 1); world
// rank 0 trains alone as a group of 1, at the same time.
TEST(ZeroEqualsReferences, OnAGroup) {
  std::vector<testing::Report> reports(4);
  comm::run_thread_ranks(4, [&](Communicator& world) {
    auto group = world.split(/*color=*/world.rank() == 0 ? 1 : 0, /*key=*/world.rank(), "zero");
    ASSERT_EQ(group->size(), world.rank() == 0 ? 1 : 3);
    reports[static_cast<size_t>(world.rank())] = testing::check_against_references(*group);
  });
  expect_clean(reports, "group");
}

torch::nn::Sequential small_model() {
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::Linear(16, 5));  // 144 + 85 = 229 elements
}

// ZeRO-2 keeps 1/p of the gradient: after backward no parameter holds a
// .grad, and the shards (229 = 77 + 76 + 76 on 3 ranks) cover the model
// once. Adam's state exists for the shard only. ZeRO-1 keeps whole .grads.
TEST(Zero2, KeepsOnlyItsShardOfGradientAndOptimizerState) {
  std::mutex mutex;
  int64_t total = 0;
  comm::run_thread_ranks(3, [&](Communicator& comm) {
    auto model = small_model();
    ZeroOptions options;
    options.bucket_cap_bytes = options.first_bucket_bytes = 256;
    Zero2 zero(comm, *model, adam(torch::optim::AdamOptions(0.01)), options);
    zero.zero_grad();
    model->forward(at::ones({2, 8})).sum().backward();
    for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
    const int64_t mine = zero.layout().shard_numel(comm.rank());
    EXPECT_EQ(zero.sharded().shard_grad().numel(), mine);
    EXPECT_GT(zero.sharded().shard_grad().abs().sum().item<double>(), 0.0);
    zero.step();
    int64_t state_numel = 0;  // Adam's moments, for the chunks only
    for (const auto& [key, state] : zero.sharded().optimizer().state())
      state_numel += static_cast<torch::optim::AdamParamState&>(*state).exp_avg().numel();
    EXPECT_EQ(state_numel, mine);
    EXPECT_EQ(zero.stats().synced_steps, 1);
    EXPECT_EQ(zero.stats().reduce_scatters, zero.layout().buckets());
    std::lock_guard<std::mutex> lock(mutex);
    total += mine;
  });
  EXPECT_EQ(total, 229);
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    auto model = small_model();
    Zero1 zero(comm, *model, adam(torch::optim::AdamOptions(0.01)));
    model->forward(at::ones({2, 8})).sum().backward();
    zero.step();
    for (const auto& p : model->parameters()) EXPECT_TRUE(p.grad().defined());
  });
}

// ZeRO-1 keeps one gradient: each bucket's parameters have their .grad side
// by side in one storage, in the bucket's layout, and the shard's .grad is my
// chunk of that same storage, so the gradients take exactly Psi elements.
// Two backwards accumulate there; a .grad that user code replaced is reduced
// with its new values, and a dropped one as zeros: my chunk then holds the
// average over the ranks of what each rank's .grads said, computed here
// with autograd::grad and an all-reduce.
TEST(Zero1, KeepsOneGradientAndReducesItInPlace) {
  comm::run_thread_ranks(3, [&](Communicator& comm) {
    auto model = small_model();  // 229 elements
    ZeroOptions options;
    options.bucket_cap_bytes = options.first_bucket_bytes = 256;
    Zero1 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)), options);
    const ShardLayout& layout = zero.layout();
    const std::vector<at::Tensor>& params = zero.sharded().params();
    ASSERT_GT(layout.buckets(), 1);
    ASSERT_EQ(params.size(), 4u);
    const at::Tensor x = at::randn({2, 8}).mul_(comm.rank() + 1);  // every rank its own data

    // The reference: each rank's .grads as the test leaves them, averaged.
    std::vector<at::Tensor> local =
        torch::autograd::grad({model->forward(x).pow(2).sum() + model->forward(x * 2).pow(2).sum()}, params);
    local[1] = at::full_like(params[1], 0.5 * (comm.rank() + 1));  // replaced below
    local[2] = at::zeros_like(params[2]);                         // dropped below
    std::vector<at::Tensor> expected;  // per bucket (numel,)
    for (const ddp::Bucket& bucket : layout.plan.buckets) {
      std::vector<at::Tensor> pieces;
      for (int i : bucket.params) pieces.push_back(local[static_cast<size_t>(i)].reshape({-1}));
      at::Tensor sum = at::cat(pieces);
      comm.native_all_reduce(sum);
      expected.push_back(sum / comm.size());
    }

    zero.zero_grad();
    model->forward(x).pow(2).sum().backward();
    model->forward(x * 2).pow(2).sum().backward();
    const std::vector<int> bucket_of = layout.plan.bucket_of();
    const std::vector<int64_t> offset_of = layout.plan.offset_of();
    auto base_of = [&](int b) {  // where bucket b's gradient starts: its first parameter's .grad
      return params[static_cast<size_t>(layout.plan.buckets[static_cast<size_t>(b)].params.front())]
          .grad()
          .data_ptr<float>();
    };
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& grad = params[i].grad();
      const int b = bucket_of[i];
      EXPECT_EQ(grad.data_ptr<float>(), base_of(b) + offset_of[i]) << "parameter " << i;
      EXPECT_TRUE(grad.is_alias_of(zero.sharded().gradient_buffers()[static_cast<size_t>(b)])) << "parameter " << i;
    }
    params[1].mutable_grad() = at::full_like(params[1], 0.5 * (comm.rank() + 1));
    params[2].mutable_grad() = at::Tensor();

    zero.reduce_gradients();
    for (int b = 0; b < layout.buckets(); ++b) {
      const collectives::Range mine = layout.chunk(b, comm.rank());
      const at::Tensor& chunk_grad = zero.sharded().shard()[static_cast<size_t>(b)].grad();
      EXPECT_EQ(chunk_grad.data_ptr<float>(), base_of(b) + mine.offset) << "bucket " << b;
      EXPECT_TRUE(at::allclose(chunk_grad, expected[static_cast<size_t>(b)].narrow(0, mine.offset, mine.count),
                               1e-5, 1e-6))
          << "bucket " << b << ": " << chunk_grad << " vs " << expected[static_cast<size_t>(b)];
    }
    for (size_t i = 0; i < params.size(); ++i)  // the replaced and the dropped .grad are their slots again
      EXPECT_EQ(params[i].grad().data_ptr<float>(), base_of(bucket_of[i]) + offset_of[i]) << "parameter " << i;
    EXPECT_EQ(zero.sharded().memory().gradients, 229 * 4);
    EXPECT_EQ(zero.sharded().memory().gradients, zero.sharded().accounting().gradients);

    zero.step();
    EXPECT_NO_THROW(compat::zero_grad(zero.sharded().optimizer()));  // detach_() works: .grad is not a view
    zero.zero_grad();
    for (const at::Tensor& p : params) EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
  });
}

// Every bucket's reduce-scatter and all-gather is one event on lane "zero",
// with the bucket (an index of the layout, each one once per rank and
// collective), the stage and the bytes; the layout is recorded once.
TEST(ZeroTrace, BucketEventsOnTheZeroLane) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  int buckets = 0;
  comm::run_thread_ranks(
      2,
      [&](Communicator& comm) {
        auto model = small_model();
        ZeroOptions zo;
        zo.bucket_cap_bytes = zo.first_bucket_bytes = 256;
        Zero2 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)), zo);
        model->forward(at::ones({2, 8})).sum().backward();
        zero.step();
        if (comm.rank() == 0) buckets = zero.layout().buckets();
      },
      options);
  ASSERT_GT(buckets, 1);
  int layouts = 0;
  // "rank R zero_all_gather" -> how many events named each bucket
  std::map<std::string, std::vector<int>> named;
  for (const std::string category : {"zero_reduce_scatter", "zero_all_gather"})
    for (int rank : {0, 1}) named["rank " + std::to_string(rank) + " " + category].assign(buckets, 0);
  for (const auto& e : sink->events()) {
    if (e.lane != kLaneZero) continue;
    layouts += e.category == "zero_layout";
    if (e.category != "zero_reduce_scatter" && e.category != "zero_all_gather") continue;
    EXPECT_EQ(e.arg("stage"), "ZeRO-2");
    EXPECT_GT(e.bytes, 0);
    const std::string bucket = e.arg("bucket");
    ASSERT_TRUE(!bucket.empty() && bucket.find_first_not_of("0123456789") == std::string::npos)
        << e.name << ": bucket '" << bucket << "'";
    const int b = std::stoi(bucket);
    ASSERT_LT(b, buckets) << e.name;
    const std::string verb = e.category == "zero_reduce_scatter" ? "reduce-scatter" : "all-gather";
    EXPECT_EQ(e.name, verb + " bucket " + bucket);
    auto counts = named.find("rank " + std::to_string(e.rank) + " " + e.category);
    ASSERT_NE(counts, named.end()) << "rank " << e.rank;
    ++counts->second[static_cast<size_t>(b)];
  }
  EXPECT_EQ(layouts, 2);
  for (const auto& [who, counts] : named) EXPECT_EQ(counts, std::vector<int>(buckets, 1)) << who;
}

// The flight recorder names each ZeRO collective's bucket (lib/flight/site.hpp),
// ZeRO-1's in-place reduce-scatter of its gradient buffers included: a hang
// in step N then says which bucket the ranks were in.
TEST(ZeroFlight, EveryCollectiveNamesItsBucket) {
  for (const int stage : {1, 2}) {
    comm::CommOptions options;
    options.flight = flight::Recorder::create({1000, ::testing::TempDir()});
    int buckets = 0;
    std::vector<flight::Dump> dumps(2);
    comm::run_thread_ranks(
        2,
        [&](Communicator& comm) {
          auto model = small_model();
          ZeroOptions zo;
          zo.bucket_cap_bytes = zo.first_bucket_bytes = 256;
          auto run = [&](auto& zero) {
            model->forward(at::ones({2, 8})).sum().backward();
            zero.step();
            if (comm.rank() == 0) buckets = zero.layout().buckets();
          };
          if (stage == 1) {
            Zero1 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)), zo);
            run(zero);
          } else {
            Zero2 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)), zo);
            run(zero);
          }
          dumps[static_cast<size_t>(comm.rank())] = options.flight->ring_of(comm.rank(), comm.size())->snapshot();
        },
        options);
    ASSERT_GT(buckets, 1);
    for (const flight::Dump& dump : dumps) {
      std::map<std::string, int> per_op;
      for (const flight::Entry& e : dump.entries) {
        if (e.op != "reduce_scatter" && e.op != "all_gather") continue;
        const std::string what = "ZeRO-" + std::to_string(stage) + " " + e.op + " #" + std::to_string(e.seq) + ": '" +
                                 e.site + "'";
        if (e.site.find("set-up") != std::string::npos) {  // the constructor's check of the parameters
          EXPECT_EQ(e.site.rfind("ZeRO-" + std::to_string(stage) + " set-up", 0), 0u) << what;
          continue;
        }
        ++per_op[e.op];
        EXPECT_EQ(e.site.rfind("ZeRO ", 0), 0u) << what;
        EXPECT_NE(e.site.find("bucket"), std::string::npos) << what;
      }
      EXPECT_EQ(per_op["reduce_scatter"], buckets) << "ZeRO-" << stage;
      EXPECT_EQ(per_op["all_gather"], buckets) << "ZeRO-" << stage;
    }
  }
}

// Overlap really happens: ZeRO-2 queues its first bucket (the last layer)
// on the comm thread while backward still has the earlier layers'
// gradients to produce. The reduce-scatter's span says how many were
// pending when it was queued: a cause, which a comm thread delayed by a
// busy machine cannot change. The last bucket is queued with none pending.
// How long the first reduce-scatter ran before backward ended is printed,
// not checked. Six 256x256 layers, a cap of 200 KB: a bucket per layer.
TEST(ZeroOverlap, FirstBucketIsReduceScatteredWhileBackwardRuns) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  comm::run_thread_ranks(
      2,
      [&](Communicator& comm) {
        torch::nn::Sequential model = models::square_mlp(6, 256, models::Activation::kTanh);
        ZeroOptions zo;
        zo.bucket_cap_bytes = zo.first_bucket_bytes = 200 * 1000;
        Zero2 zero(comm, *model, sgd(torch::optim::SGDOptions(0.01)), zo);
        EXPECT_EQ(zero.layout().buckets(), 6);
        model->forward(at::randn({512, 256})).pow(2).mean().backward();
        zero.step();
      },
      options);
  const std::string pending_key = "grads pending at submit";
  for (int rank = 0; rank < 2; ++rank) {
    std::map<std::string, trace::Event> reduce_scatter;  // by bucket
    int64_t wait = -1;
    for (const auto& e : sink->events()) {
      if (e.rank != rank) continue;
      if (e.category == "zero_reduce_scatter") reduce_scatter[e.arg("bucket")] = e;
      if (e.category == "zero_wait") wait = e.begin_us;
    }
    ASSERT_EQ(reduce_scatter.size(), 6u) << "rank " << rank;
    const std::string first = reduce_scatter["0"].arg(pending_key);
    ASSERT_FALSE(first.empty()) << "rank " << rank << ": bucket 0's span has no '" << pending_key << "'";
    EXPECT_GT(std::stoll(first), 0) << "rank " << rank
                                    << ": bucket 0 was queued only once backward had produced every gradient";
    EXPECT_EQ(reduce_scatter["5"].arg(pending_key), "0") << "rank " << rank << ": the last bucket";
    const int64_t lead_us = wait - reduce_scatter["0"].begin_us;
    std::cout << "rank " << rank << ": bucket 0 queued with " << first << " of 12 gradients pending; its "
              << "reduce-scatter began " << lead_us << " us before backward ended" << std::endl;
    RecordProperty("rank" + std::to_string(rank) + "_bucket0_lead_us", std::to_string(lead_us));
  }
}

}  // namespace
}  // namespace distlab::zero
