// Communicator groups (split, new_group) and asynchronous collectives on the
// threads backend: each group gets its own sums even when all are busy at
// once, traces keep the job-wide rank, and a queued collective fails with
// the peer named instead of hanging.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <mutex>

#include "collectives/async.hpp"
#include "collectives/collectives.hpp"
#include "comm/threads_backend.hpp"
#include "trace/recorder.hpp"
#include "support/recording.hpp"

namespace distlab::comm {
namespace {

using collectives::Algorithm;

TEST(Split, CapstoneLayoutStageAndReplicaGroups) {
  // 2 stages x 2 replicas: stage groups {0,1} {2,3}, replica groups {0,2} {1,3}.
  run_thread_ranks(4, [](Communicator& world) {
    const int r = world.rank();
    auto stage = world.split(/*color=*/r / 2, /*key=*/r, "stage" + std::to_string(r / 2));
    auto replica = world.split(/*color=*/r % 2, /*key=*/r, "replica" + std::to_string(r % 2));
    EXPECT_EQ(stage->size(), 2);
    EXPECT_EQ(stage->rank(), r % 2);
    EXPECT_EQ(replica->rank(), r / 2);
    EXPECT_EQ(stage->world_rank(), r);
    EXPECT_EQ(stage->world_rank_of(1 - stage->rank()), r ^ 1);
    EXPECT_EQ(replica->group(), "replica" + std::to_string(r % 2));
    // Both kinds of group busy at once, with every algorithm: each sums its own.
    for (Algorithm algorithm : {Algorithm::kNative, Algorithm::kRing, Algorithm::kHalvingDoubling}) {
      auto a = torch::full({1001}, static_cast<float>(r + 1));
      auto b = torch::full({1001}, static_cast<float>(10 * (r + 1)));
      auto wa = collectives::CommThread(*stage);
      auto work = collectives::all_reduce_async(wa, a, ReduceOp::kSum, algorithm);
      collectives::all_reduce(*replica, b, ReduceOp::kSum, algorithm);
      work->wait();
      const float stage_sum = (r / 2 == 0) ? 1 + 2 : 3 + 4;
      const float replica_sum = 10.0f * ((r % 2 == 0) ? 1 + 3 : 2 + 4);
      EXPECT_TRUE(torch::equal(a, torch::full({1001}, stage_sum))) << collectives::to_string(algorithm);
      EXPECT_TRUE(torch::equal(b, torch::full({1001}, replica_sum))) << collectives::to_string(algorithm);
    }
  });
}

TEST(Split, KeyOrdersMembersAndNegativeColorJoinsNothing) {
  run_thread_ranks(5, [](Communicator& world) {
    const int r = world.rank();
    // Ranks 0..3 in reverse order; rank 4 stays out.
    auto group = world.split(r < 4 ? 7 : -1, /*key=*/-r);
    if (r == 4) {
      EXPECT_EQ(group, nullptr);
      return;
    }
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->size(), 4);
    EXPECT_EQ(group->rank(), 3 - r);
    auto t = torch::full({3}, static_cast<double>(r));
    group->native_broadcast(t, /*root=*/0);  // group rank 0 is world rank 3
    EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0)));
  });
}

TEST(Split, NewGroupAndGroupsOfGroups) {
  run_thread_ranks(4, [](Communicator& world) {
    auto odd = world.new_group({3, 1}, "odd");
    if (world.rank() % 2 == 0) {
      EXPECT_EQ(odd, nullptr);
    } else {
      EXPECT_EQ(odd->rank(), world.rank() == 3 ? 0 : 1);
      auto solo = odd->split(odd->rank(), 0);
      EXPECT_EQ(solo->size(), 1);
      EXPECT_EQ(solo->world_rank(), world.rank());
      auto t = torch::full({2}, static_cast<float>(world.rank()));
      odd->native_all_reduce(t);
      EXPECT_TRUE(torch::equal(t, torch::full({2}, 4.0f)));
    }
    EXPECT_THROW(world.new_group({0, 0}), CommError);
  });
}

TEST(Split, TraceEventsCarryWorldRanksAndGroupName) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  run_thread_ranks(
      4,
      [](Communicator& world) {
        auto group = world.split(world.rank() % 2, world.rank(), "pair" + std::to_string(world.rank() % 2));
        auto t = torch::ones({8});
        if (group->rank() == 0)
          group->send(t, 1, 5);
        else
          group->recv(t, 0, 5);
      },
      options);
  int sends = 0;
  for (const auto& e : sink->events()) {
    if (e.name != "send") continue;
    ++sends;
    EXPECT_TRUE(e.rank == 0 || e.rank == 1) << "send from world rank " << e.rank;
    EXPECT_EQ(e.peer, e.rank + 2);  // group rank 1 is world rank 2 or 3
    EXPECT_EQ(e.arg("group"), "pair" + std::to_string(e.rank));
  }
  EXPECT_EQ(sends, 2);
}

TEST(Split, ErrorsNameTheWorldRankAndTheGroup) {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(300);
  try {
    run_thread_ranks(
        4,
        [](Communicator& world) {
          auto group = world.split(world.rank() / 2, world.rank(), "stage" + std::to_string(world.rank() / 2));
          auto t = torch::ones({4});
          if (world.rank() == 2) group->recv(t, 1, 9);  // world rank 3 never sends
        },
        options);
    FAIL() << "a recv nobody answered completed";
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 2 (stage1 rank 0): recv from rank 3 (stage1 rank 1)"), std::string::npos) << what;
  }
}

TEST(Async, EveryAlgorithmMatchesTheBlockingCall) {
  run_thread_ranks(3, [](Communicator& comm) {
    collectives::CommThread thread(comm);
    for (Algorithm algorithm : {Algorithm::kNative, Algorithm::kRing, Algorithm::kHalvingDoubling,
                                Algorithm::kReduceBroadcast}) {
      // Several in flight at once, on different tags.
      std::vector<at::Tensor> tensors;
      std::vector<WorkPtr> works;
      for (int k = 0; k < 3; ++k) {
        tensors.push_back(torch::arange(0, 1000 + k, torch::kFloat) * (comm.rank() + 1));
        works.push_back(collectives::all_reduce_async(thread, tensors.back(), ReduceOp::kSum, algorithm, k));
      }
      for (int k = 0; k < 3; ++k) {
        works[static_cast<size_t>(k)]->wait();
        auto expected = torch::arange(0, 1000 + k, torch::kFloat) * 6;  // 1 + 2 + 3
        EXPECT_TRUE(torch::equal(tensors[static_cast<size_t>(k)], expected)) << collectives::to_string(algorithm);
      }
    }
  });
}

TEST(Async, APeerThatNeverComesFailsTheWaitNamingIt) {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(300);
  std::mutex mutex;
  std::string message;
  run_thread_ranks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) return;
        collectives::CommThread thread(comm);
        auto t = torch::ones({100});
        auto work = collectives::all_reduce_async(thread, t, ReduceOp::kSum, Algorithm::kRing);
        try {
          work->wait();
        } catch (const TimeoutError& e) {
          std::lock_guard<std::mutex> lock(mutex);
          message = e.what();
        }
      },
      options);
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("did not complete within 300 ms"), std::string::npos) << message;
}

}  // namespace
}  // namespace distlab::comm
