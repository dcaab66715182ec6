// DistributedDataParallel on thread ranks against one process on the whole
// batch: the naive version, every all-reduce algorithm, a group, compression,
// no_sync; and the failures DDP must name.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "comm/threads_backend.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp/naive_data_parallel.hpp"
#include "ddp_test_util.hpp"
#include "trace/recorder.hpp"
#include "support/recording.hpp"

namespace distlab::ddp {
namespace {

using namespace testing;
using collectives::Algorithm;
using comm::Communicator;

constexpr int64_t kRowsPerRank = 6;
constexpr int kSteps = 4;

enum class Flavor { kNaive, kDdp };

struct Case {
  int ranks;
  Opt opt;
  Flavor flavor;
  Algorithm algorithm;
  Compression compression = Compression::kNone;
  int64_t cap_bytes = 512;  // small: several buckets for this model
  bool bucket_view = false;  // DdpOptions::gradient_as_bucket_view
};

// With gradient_as_bucket_view, every .grad lies in its bucket: the
// parameters of one bucket have gradients at consecutive offsets of one
// block of memory, as the plan lays them out.
void expect_grads_in_buckets(torch::nn::Module& model, const BucketPlan& plan) {
  const std::vector<at::Tensor> params = model.parameters();
  const std::vector<int64_t> offset = plan.offset_of();
  for (const Bucket& bucket : plan.buckets) {
    const at::Tensor& first = params[static_cast<size_t>(bucket.params.front())].grad();
    ASSERT_TRUE(first.defined());
    const char* base = static_cast<const char*>(first.data_ptr()) -
                       offset[static_cast<size_t>(bucket.params.front())] * first.element_size();
    for (int i : bucket.params) {
      const at::Tensor& grad = params[static_cast<size_t>(i)].grad();
      EXPECT_EQ(static_cast<const char*>(grad.data_ptr()), base + offset[static_cast<size_t>(i)] * grad.element_size())
          << "parameter " << i << "'s gradient is not in its bucket";
    }
  }
}

// Trains `ranks` replicas for kSteps; rank r's share of step s is rows
// [s*N*B + r*B, s*N*B + (r+1)*B). Returns rank 0's model after checking that
// every replica ended equal to it.
torch::nn::Sequential train_replicas(const Case& c, const torch::nn::Sequential& initial, const Data& data) {
  std::mutex mutex;
  std::vector<torch::nn::Sequential> finals(static_cast<size_t>(c.ranks));
  comm::run_thread_ranks(c.ranks, [&](Communicator& comm) {
    auto model = make_model(1000 + comm.rank());
    // Only rank 0 starts from the reference weights: the others must get them by broadcast.
    if (comm.rank() == 0) copy_parameters(*initial, *model);
    const int64_t n = c.ranks * kRowsPerRank;
    auto rows = [&](const at::Tensor& t, int s) { return t.narrow(0, s * n + comm.rank() * kRowsPerRank, kRowsPerRank); };
    if (c.flavor == Flavor::kNaive) {
      broadcast_parameters(comm, *model);
      auto optimizer = make_optimizer(*model, c.opt);
      for (int s = 0; s < kSteps; ++s) {
        compat::zero_grad(*optimizer);
        loss_of(model, rows(data.x, s), rows(data.y, s)).backward();
        average_gradients(comm, *model, c.algorithm);
        optimizer->step();
      }
    } else {
      DdpOptions options;
      options.algorithm = c.algorithm;
      options.compression = c.compression;
      options.bucket_cap_bytes = c.cap_bytes;
      options.first_bucket_bytes = c.cap_bytes / 2;
      options.gradient_as_bucket_view = c.bucket_view;
      DistributedDataParallel ddp(comm, model.ptr(), options);
      auto optimizer = make_optimizer(*model, c.opt);
      for (int s = 0; s < kSteps; ++s) {
        compat::zero_grad(*optimizer);
        at::Tensor loss = ddp.forward([&] { return loss_of(model, rows(data.x, s), rows(data.y, s)); });
        loss.backward();
        optimizer->step();
      }
      EXPECT_EQ(ddp.stats().synced_steps, kSteps);
      if (c.bucket_view) expect_grads_in_buckets(*model, ddp.bucket_plan());
    }
    std::lock_guard<std::mutex> lock(mutex);
    finals[static_cast<size_t>(comm.rank())] = model;
  });
  for (int r = 1; r < c.ranks; ++r)
    EXPECT_EQ(max_difference(*finals[0], *finals[static_cast<size_t>(r)]), 0.0) << "replica " << r << " drifted";
  return finals[0];
}

double error_against_single(const Case& c) {
  auto initial = make_model(7);
  const Data data = make_data(c.ranks * kRowsPerRank * kSteps, 42);
  auto single = make_model(0);
  copy_parameters(*initial, *single);
  train_single(single, data, c.ranks * kRowsPerRank, kSteps, c.opt);
  auto replica = train_replicas(c, initial, data);
  // The parameters really moved: the comparison is not between two copies of the start.
  EXPECT_TRUE(test_support::exceeds(max_difference(*single, *initial), 1e-3)) << "the parameters did not move";
  return max_difference(*single, *replica);
}

TEST(DdpEqualsSingleProcess, NaiveSgdAndAdam) {
  for (Opt opt : {Opt::kSgd, Opt::kAdam})
    for (int ranks : {2, 3, 4}) {
      const double err = error_against_single({ranks, opt, Flavor::kNaive, Algorithm::kNative});
      EXPECT_LT(err, 2e-5) << ranks << " ranks, optimizer " << static_cast<int>(opt);
    }
}

TEST(DdpEqualsSingleProcess, EveryAllReduceAlgorithm) {
  for (Algorithm algorithm : {Algorithm::kNative, Algorithm::kRing, Algorithm::kHalvingDoubling,
                              Algorithm::kReduceBroadcast})
    for (Opt opt : {Opt::kSgd, Opt::kAdam})
      for (int ranks : {2, 3, 4}) {
        const double err = error_against_single({ranks, opt, Flavor::kDdp, algorithm});
        EXPECT_LT(err, 2e-5) << collectives::to_string(algorithm) << ", " << ranks << " ranks";
      }
}

TEST(DdpEqualsSingleProcess, OneBucketPerParameterAndOneBucketForAll) {
  for (int64_t cap : {int64_t{0}, int64_t{1} << 30}) {
    const double err = error_against_single({4, Opt::kSgd, Flavor::kDdp, Algorithm::kRing, Compression::kNone, cap});
    EXPECT_LT(err, 2e-5) << "cap " << cap;
  }
}

// .grad shares the bucket's memory: the optimizer's zero_grad clears the
// bucket, backward accumulates into it, and the result is the same.
TEST(DdpEqualsSingleProcess, GradientAsBucketView) {
  for (Opt opt : {Opt::kSgd, Opt::kAdam})
    for (int ranks : {2, 3}) {
      Case c{ranks, opt, Flavor::kDdp, Algorithm::kNative};
      c.bucket_view = true;
      EXPECT_LT(error_against_single(c), 2e-5) << ranks << " ranks, optimizer " << static_cast<int>(opt);
    }
}

// fp16 keeps ~11 bits of mantissa: after 4 SGD steps the parameters stay
// within 1e-3 of the float32 run (values here are O(0.1-1)); bf16 keeps 8
// bits: 1e-2.
TEST(DdpEqualsSingleProcess, CompressedGradientsWithinTolerance) {
  const double fp16 = error_against_single({4, Opt::kSgd, Flavor::kDdp, Algorithm::kNative, Compression::kFp16});
  const double bf16 = error_against_single({4, Opt::kSgd, Flavor::kDdp, Algorithm::kRing, Compression::kBf16});
  EXPECT_LT(fp16, 1e-3);
  EXPECT_LT(bf16, 1e-2);
  EXPECT_GT(bf16, 0.0);  // the compression really happened
}

// Two groups of a 4-rank world train two different models at the same time:
// ranks {0, 2} on data set 0 and {1, 3} on data set 1, each equal to one
// process on its own data.
TEST(DdpEqualsSingleProcess, OnGroupsTrainingAtOnce) {
  const int kGroups = 2;
  std::vector<torch::nn::Sequential> initial, single;
  std::vector<Data> data;
  for (int g = 0; g < kGroups; ++g) {
    initial.push_back(make_model(50 + g));
    data.push_back(make_data(2 * kRowsPerRank * kSteps, 60 + static_cast<uint64_t>(g)));
    single.push_back(make_model(0));
    copy_parameters(*initial[static_cast<size_t>(g)], *single.back());
    train_single(single.back(), data.back(), 2 * kRowsPerRank, kSteps, Opt::kAdam);
  }
  std::mutex mutex;
  std::vector<double> errors(4, -1);
  comm::run_thread_ranks(4, [&](Communicator& world) {
    const int g = world.rank() % kGroups;
    auto group = world.split(/*color=*/g, /*key=*/world.rank(), "replicas" + std::to_string(g));
    ASSERT_EQ(group->size(), 2);
    EXPECT_EQ(group->world_rank(), world.rank());
    auto model = make_model(900 + world.rank());
    if (group->rank() == 0) copy_parameters(*initial[static_cast<size_t>(g)], *model);
    DdpOptions options;
    options.bucket_cap_bytes = 600;
    options.algorithm = Algorithm::kRing;
    DistributedDataParallel ddp(*group, model.ptr(), options);
    auto optimizer = make_optimizer(*model, Opt::kAdam);
    const auto& d = data[static_cast<size_t>(g)];
    for (int s = 0; s < kSteps; ++s) {
      compat::zero_grad(*optimizer);
      auto x = d.x.narrow(0, s * 2 * kRowsPerRank + group->rank() * kRowsPerRank, kRowsPerRank);
      auto y = d.y.narrow(0, s * 2 * kRowsPerRank + group->rank() * kRowsPerRank, kRowsPerRank);
      ddp.forward([&] { return loss_of(model, x, y); }).backward();
      optimizer->step();
    }
    std::lock_guard<std::mutex> lock(mutex);
    errors[static_cast<size_t>(world.rank())] = max_difference(*single[static_cast<size_t>(g)], *model);
  });
  for (int r = 0; r < 4; ++r) EXPECT_LT(errors[static_cast<size_t>(r)], 2e-5) << "world rank " << r;
}

// k micro-steps under no_sync, the last one synchronized, equal one step on
// the k-fold batch (each micro-step's loss divided by k); only one
// all-reduce round is paid per step. Two such steps, with .grad a copy and
// with .grad the bucket itself (from the second step on, no_sync then
// accumulates straight into the bucket).
TEST(NoSync, AccumulatedMicroStepsEqualOneBigStep) {
  const int kMicro = 3, kRanks = 2, kBigSteps = 2;
  for (bool view : {false, true}) {
    auto initial = make_model(11);
    const Data data = make_data(kRanks * kRowsPerRank * kMicro * kBigSteps, 5);
    const int64_t big = kRanks * kRowsPerRank * kMicro;
    auto single = make_model(0);
    copy_parameters(*initial, *single);
    {
      auto optimizer = make_optimizer(*single, Opt::kSgd);
      for (int s = 0; s < kBigSteps; ++s) {
        compat::zero_grad(*optimizer);
        loss_of(single, data.x.narrow(0, s * big, big), data.y.narrow(0, s * big, big)).backward();
        optimizer->step();
      }
    }
    std::mutex mutex;
    std::vector<double> errors(kRanks, -1);
    std::vector<ReducerStats> stats(kRanks);
    comm::run_thread_ranks(kRanks, [&](Communicator& comm) {
      auto model = make_model(300 + comm.rank());
      if (comm.rank() == 0) copy_parameters(*initial, *model);
      DdpOptions options;
      options.bucket_cap_bytes = 512;
      options.gradient_as_bucket_view = view;
      DistributedDataParallel ddp(comm, model.ptr(), options);
      auto optimizer = make_optimizer(*model, Opt::kSgd);
      for (int s = 0; s < kBigSteps; ++s) {
        compat::zero_grad(*optimizer);
        // Micro-step i of rank r: rows of the big batch that the single process
        // also sees; together the k x ranks pieces cover it exactly once.
        auto piece = [&](const at::Tensor& t, int i) {
          return t.narrow(0, s * big + (i * kRanks + comm.rank()) * kRowsPerRank, kRowsPerRank);
        };
        for (int i = 0; i < kMicro; ++i) {
          auto step = [&] { return loss_of(model, piece(data.x, i), piece(data.y, i)) / kMicro; };
          if (i < kMicro - 1) {
            auto guard = ddp.no_sync();
            ddp.forward(step).backward();
          } else {
            ddp.forward(step).backward();
          }
        }
        optimizer->step();
      }
      if (view) expect_grads_in_buckets(*model, ddp.bucket_plan());
      std::lock_guard<std::mutex> lock(mutex);
      errors[static_cast<size_t>(comm.rank())] = max_difference(*single, *model);
      stats[static_cast<size_t>(comm.rank())] = ddp.stats();
    });
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_LT(errors[static_cast<size_t>(r)], 2e-6) << "rank " << r << (view ? ", bucket view" : "");
      EXPECT_EQ(stats[static_cast<size_t>(r)].synced_steps, kBigSteps);
      EXPECT_EQ(stats[static_cast<size_t>(r)].local_steps, kBigSteps * (kMicro - 1));
    }
  }
}

TEST(DdpErrors, UnusedParameterIsNamed) {
  EXPECT_THROW(
      {
        try {
          comm::run_thread_ranks(2, [&](Communicator& comm) {
            auto model = make_model(1);
            DistributedDataParallel ddp(comm, model.ptr());
            // Only the first layer takes part in the loss.
            auto x = at::ones({2, 8});
            ddp.forward([&] { return (*model)[0]->as<torch::nn::Linear>()->forward(x).sum(); }).backward();
          });
        } catch (const comm::CommError& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("'4.weight'"), std::string::npos) << what;
          EXPECT_NE(what.find("find_unused_parameters"), std::string::npos) << what;
          throw;
        }
      },
      comm::CommError);
}

TEST(DdpErrors, UnusedParameterAllowedIsReducedAsZero) {
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    auto model = make_model(1);
    DdpOptions options;
    options.find_unused_parameters = true;
    DistributedDataParallel ddp(comm, model.ptr(), options);
    auto x = at::ones({2, 8}) * (comm.rank() + 1);
    auto first = (*model)[0]->as<torch::nn::Linear>();
    ddp.forward([&] { return first->forward(x).sum(); }).backward();
    // d/dW of sum over 2 rows of (W x + b) is 2x for every output: the mean
    // over ranks of 2 x 1 and 2 x 2.
    EXPECT_TRUE(at::allclose(first->weight.grad(), at::full({32, 8}, 3.0f)));
    auto last = (*model)[4]->as<torch::nn::Linear>();
    EXPECT_EQ(last->weight.grad().abs().max().item<float>(), 0.0f);
  });
}

// A first step that missed a gradient (an error the caller caught) does not
// stop the rebuild: the order of the next complete step is used.
TEST(DdpErrors, BucketsAreStillRebuiltAfterAStepThatMissedAGradient) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  comm::run_thread_ranks(
      2,
      [&](Communicator& comm) {
        auto model = make_model(1);
        DistributedDataParallel ddp(comm, model.ptr());
        auto x = at::ones({2, 8});
        auto first = (*model)[0]->as<torch::nn::Linear>();
        EXPECT_ANY_THROW(ddp.forward([&] { return first->forward(x).sum(); }).backward());
        for (int s = 0; s < 3; ++s) ddp.forward([&] { return model->forward(x).sum(); }).backward();
      },
      options);
  int rebuilt = 0;
  for (const auto& e : sink->events()) rebuilt += e.category == "bucket_plan" && e.arg("rebuilt") == "1";
  EXPECT_EQ(rebuilt, 2);  // once per rank
}

// pytorch#69031: with find_unused_parameters, a parameter used only in the
// no_sync micro-steps must still have its accumulated gradient averaged.
TEST(NoSync, ParameterUsedOnlyUnderNoSyncKeepsItsGradient) {
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(4, 1), torch::nn::Linear(4, 1));
    DdpOptions options;
    options.find_unused_parameters = true;
    DistributedDataParallel ddp(comm, model.ptr(), options);
    auto a = model[0]->as<torch::nn::Linear>();
    auto b = model[1]->as<torch::nn::Linear>();
    const float r = static_cast<float>(comm.rank());
    {
      auto guard = ddp.no_sync();
      ddp.forward([&] { return a->forward(at::ones({2, 4}) * (r + 1)).sum(); }).backward();
    }
    ddp.forward([&] { return b->forward(at::ones({2, 4}) * (r + 2)).sum(); }).backward();
    // d/dW of the sum over 2 rows is 2x: a gets 2(r + 1), mean over ranks 3;
    // b gets 2(r + 2), mean 5.
    EXPECT_TRUE(at::allclose(a->weight.grad(), at::full({1, 4}, 3.0f))) << a->weight.grad();
    EXPECT_TRUE(at::allclose(b->weight.grad(), at::full({1, 4}, 5.0f))) << b->weight.grad();
  });
}

TEST(DdpErrors, ShapeMismatchNamesParameterAndRanks) {
  try {
    comm::run_thread_ranks(3, [&](Communicator& comm) {
      auto model = comm.rank() == 2 ? torch::nn::Sequential(torch::nn::Linear(8, 31)) : torch::nn::Sequential(torch::nn::Linear(8, 32));
      DistributedDataParallel ddp(comm, model.ptr());
    });
    FAIL() << "a shape mismatch went through";
  } catch (const comm::CommError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("parameter 0"), std::string::npos) << what;
    EXPECT_NE(what.find("ranks 0, 1 agree with rank 0, ranks 2 differ"), std::string::npos) << what;
  }
}

TEST(DdpErrors, RankThatLeavesEarlyTimesOutNamingBucketAndPeer) {
  comm::CommOptions options;
  options.timeout = std::chrono::milliseconds(400);
  try {
    comm::run_thread_ranks(
        2,
        [&](Communicator& comm) {
          auto model = make_model(1);
          DistributedDataParallel ddp(comm, model.ptr());
          if (comm.rank() == 1) return;  // leaves before the first step
          ddp.forward([&] { return loss_of(model, at::ones({2, 8}), at::zeros({2, 4})); }).backward();
        },
        options);
    FAIL() << "rank 0 finished a step alone";
  } catch (const comm::TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("DDP bucket 0"), std::string::npos) << what;
    EXPECT_NE(what.find("rank(s) 1, which never joined"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace distlab::ddp
