// The threads backend: point-to-point in every dtype and shape, message
// order, tags, failures that must end in a clear error instead of a hang,
// and the native collectives against sums computed directly.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "comm/threads_backend.hpp"
#include "comm/wait_for_rank.hpp"
#include "trace/recorder.hpp"
#include "support/recording.hpp"

namespace distlab::comm {
namespace {

using namespace std::chrono_literals;

CommOptions short_timeout(Milliseconds timeout = 300ms) {
  CommOptions options;
  options.timeout = timeout;
  return options;
}

// A tensor whose values tell who made it: rank r, salt s.
at::Tensor pattern(at::IntArrayRef shape, at::ScalarType dtype, int rank, int salt) {
  auto t = torch::arange(0, c10::multiply_integers(shape), torch::kFloat64).reshape(shape);
  return (t.fmod(97) + 100 * rank + salt).to(dtype);
}

class SendRecvTypes : public testing::TestWithParam<at::ScalarType> {};

TEST_P(SendRecvTypes, EveryShapeArrivesIntact) {
  const auto dtype = GetParam();
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {1}, {7}, {3, 5}, {2, 3, 4}, {100003}};
  run_thread_ranks(2, [&](Communicator& comm) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (comm.rank() == 0) {
        comm.send(pattern(shapes[i], dtype, 0, static_cast<int>(i)), 1, static_cast<int>(i));
      } else {
        auto got = torch::empty(shapes[i], torch::TensorOptions().dtype(dtype));
        comm.recv(got, 0, static_cast<int>(i));
        EXPECT_TRUE(torch::equal(got, pattern(shapes[i], dtype, 0, static_cast<int>(i)))) << "shape #" << i;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SendRecvTypes,
                         testing::Values(torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
                                         torch::kInt64, torch::kInt32, torch::kUInt8, torch::kBool),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

TEST(Threads, MessagesBetweenOnePairArriveInOrder) {
  const int kMessages = 200;
  run_thread_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      std::vector<WorkPtr> pending;
      std::vector<at::Tensor> keep;
      for (int i = 0; i < kMessages; ++i) {
        keep.push_back(torch::full({4}, i, torch::kInt64));
        pending.push_back(comm.isend(keep.back(), 1, 3));
      }
      for (auto& w : pending) w->wait();
    } else {
      for (int i = 0; i < kMessages; ++i) {
        auto got = torch::empty({4}, torch::kInt64);
        comm.recv(got, 0, 3);
        ASSERT_EQ(got[0].item<int64_t>(), i);
      }
    }
  });
}

TEST(Threads, TagsSelectTheMessage) {
  // Rank 0 sends tag 1 then tag 2; rank 1 receives tag 2 first.
  run_thread_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      auto a = torch::full({3}, 1.0), b = torch::full({3}, 2.0);
      auto wa = comm.isend(a, 1, 1);
      auto wb = comm.isend(b, 1, 2);
      wb->wait();
      wa->wait();
    } else {
      auto two = torch::empty({3}), one = torch::empty({3});
      comm.recv(two, 0, 2);
      comm.recv(one, 0, 1);
      EXPECT_TRUE(torch::equal(two, torch::full({3}, 2.0)));
      EXPECT_TRUE(torch::equal(one, torch::full({3}, 1.0)));
    }
  });
}

TEST(Threads, NonBlockingRingExchangeDoesNotDeadlock) {
  // Everybody sends right and receives from the left at once.
  for (int p : {2, 3, 5, 8}) {
    run_thread_ranks(p, [&](Communicator& comm) {
      const int right = (comm.rank() + 1) % p, left = (comm.rank() + p - 1) % p;
      auto out = torch::full({1000}, comm.rank(), torch::kFloat32);
      auto in = torch::empty({1000});
      auto s = comm.isend(out, right);
      auto r = comm.irecv(in, left);
      r->wait();
      s->wait();
      EXPECT_TRUE(torch::equal(in, torch::full({1000}, left, torch::kFloat32)));
    });
  }
}

TEST(Threads, RecvThatNeverArrivesTimesOutNamingThePeer) {
  try {
    run_thread_ranks(3, [&](Communicator& comm) {
      if (comm.rank() == 1) {
        auto t = torch::empty({4});
        comm.recv(t, 2, 9);  // rank 2 never sends
      }
    }, short_timeout());
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 1: recv from rank 2 (tag 9)"), std::string::npos) << message;
    EXPECT_NE(message.find("300 ms"), std::string::npos) << message;
  }
}

// A person holds rank 0 three times the communicator's timeout: the others
// wait for it, and the job goes on afterwards.
TEST(WaitForRank, OutlastsTheTimeout) {
  std::atomic<int> released{0};
  const auto start = std::chrono::steady_clock::now();
  run_thread_ranks(4, [&](Communicator& comm) {
    if (comm.rank() == 0) std::this_thread::sleep_for(900ms);
    wait_for_rank(comm, 0, /*tag=*/77);
    if (comm.rank() != 0) {
      EXPECT_GE(std::chrono::steady_clock::now() - start, 850ms) << "rank " << comm.rank() << " did not wait";
      ++released;
    }
    comm.barrier();  // the communicator still works, with its timeout
  }, short_timeout());
  EXPECT_EQ(released.load(), 3);
}

TEST(WaitForRank, ItsOwnLimitEndsTheWaitNamingTheRank) {
  try {
    run_thread_ranks(2, [&](Communicator& comm) {
      if (comm.rank() == 1) wait_for_rank(comm, 0, /*tag=*/77, /*limit=*/400ms);  // rank 0 never calls it
    }, short_timeout(100ms));
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 1: recv from rank 0 (tag 77)"), std::string::npos) << message;
    EXPECT_NE(message.find("400 ms"), std::string::npos) << message;
  }
}

TEST(Threads, SendThatIsNeverReceivedTimesOut) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(run_thread_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 0) comm.send(torch::ones({2}), 1, 0);
  }, short_timeout()), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Threads, MismatchedSizesAreReportedOnBothSides) {
  try {
    run_thread_ranks(2, [&](Communicator& comm) {
      if (comm.rank() == 0) {
        comm.send(torch::ones({50}), 1);
      } else {
        auto t = torch::empty({100});
        comm.recv(t, 0);
      }
    }, short_timeout());
    FAIL() << "expected an error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("50 Float elements but the recv expects 100 Float elements"),
              std::string::npos) << e.what();
  }
}

TEST(Threads, AFailingRankWakesTheOthersImmediately) {
  // Rank 0 waits on rank 1 with a long timeout; rank 1 throws. The job must
  // end at once with rank 1's error, not after the timeout.
  auto start = std::chrono::steady_clock::now();
  try {
    run_thread_ranks(2, [&](Communicator& comm) {
      if (comm.rank() == 1) throw std::runtime_error("out of memory (simulated)");
      auto t = torch::empty({1});
      comm.recv(t, 1);
    }, short_timeout(60s));
    FAIL();
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 failed: out of memory (simulated)"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Threads, BadPeersAndTensorsAreRefused) {
  run_thread_ranks(2, [&](Communicator& comm) {
    auto t = torch::ones({4, 4});
    EXPECT_THROW(comm.send(t, comm.rank()), CommError);  // to itself
    EXPECT_THROW(comm.send(t, 2), CommError);            // outside the world
    EXPECT_THROW(comm.send(t, -1), CommError);
    EXPECT_THROW(comm.send(t, 1 - comm.rank(), -4), CommError);  // negative tag
    EXPECT_THROW(comm.send(t.t(), 1 - comm.rank()), CommError);  // not contiguous
    EXPECT_THROW(comm.native_broadcast(t, 7), CommError);
  });
  EXPECT_THROW(make_thread_world(0), SetupError);
}

TEST(Threads, CudaTensors) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  run_thread_ranks(2, [&](Communicator& comm) {
    auto device = torch::Device(torch::kCUDA, comm.rank() % torch::cuda::device_count());
    if (comm.rank() == 0) {
      comm.send(torch::arange(1000, torch::TensorOptions().device(device)), 1, 0);
    } else {
      auto got = torch::empty({1000}, torch::TensorOptions().dtype(torch::kInt64).device(device));
      comm.recv(got, 0, 0);
      EXPECT_TRUE(torch::equal(got.cpu(), torch::arange(1000)));
    }
  });
}

// ------------------------------------------------- native collectives

// Rank r's input: values that differ per rank and per element.
at::Tensor input_of(int rank, int64_t n, at::ScalarType dtype) {
  return pattern({n}, dtype, rank, 3 * rank + 1);
}

// The naive reference: combine every rank's input in rank order.
at::Tensor expected_reduction(int p, int64_t n, at::ScalarType dtype, ReduceOp op) {
  auto acc = input_of(0, n, dtype);
  for (int r = 1; r < p; ++r) combine_into(acc, input_of(r, n, dtype), op);
  finish_average(acc, op, p);
  return acc;
}

TEST(ThreadsNative, AllReduceReduceBroadcastMatchTheNaiveReference) {
  for (int p : {1, 2, 3, 5, 8}) {
    for (int64_t n : {0, 1, 3, 1000}) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        for (auto dtype : {torch::kFloat32, torch::kInt64}) {
          const auto want = expected_reduction(p, n, dtype, op);
          const int root = p - 1;
          run_thread_ranks(p, [&](Communicator& comm) {
            auto all = input_of(comm.rank(), n, dtype);
            comm.native_all_reduce(all, op);
            EXPECT_TRUE(torch::equal(all, want)) << "all_reduce p=" << p << " n=" << n << " " << to_string(op);

            auto red = input_of(comm.rank(), n, dtype);
            comm.native_reduce(red, root, op);
            if (comm.rank() == root)
              EXPECT_TRUE(torch::equal(red, want)) << "reduce p=" << p << " n=" << n;
            else
              EXPECT_TRUE(torch::equal(red, input_of(comm.rank(), n, dtype))) << "reduce changed a non-root";

            auto b = input_of(comm.rank(), n, dtype);
            comm.native_broadcast(b, root);
            EXPECT_TRUE(torch::equal(b, input_of(root, n, dtype))) << "broadcast p=" << p << " n=" << n;
          });
        }
      }
    }
  }
}

TEST(ThreadsNative, RanksThatCallDifferentCollectivesGetAnError) {
  try {
    run_thread_ranks(2, [&](Communicator& comm) {
      auto t = torch::ones({8});
      if (comm.rank() == 0)
        comm.native_all_reduce(t);
      else
        comm.native_broadcast(t, 0);
    }, short_timeout());
    FAIL();
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks disagree on the collective"), std::string::npos) << e.what();
  }
}

TEST(ThreadsNative, BarrierTimesOutNamingTheMissingRank) {
  try {
    run_thread_ranks(4, [&](Communicator& comm) {
      if (comm.rank() != 2) comm.barrier();
    }, short_timeout());
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for rank(s) 2,"), std::string::npos) << e.what();
  }
}

TEST(ThreadsNative, BarrierReallySynchronizes) {
  std::atomic<int> arrived{0};
  run_thread_ranks(6, [&](Communicator& comm) {
    for (int round = 1; round <= 20; ++round) {
      arrived.fetch_add(1);
      comm.barrier();
      EXPECT_GE(arrived.load(), 6 * round);
      comm.barrier();
    }
  });
}

TEST(ThreadsTrace, SendAndRecvEventsPairUp) {
  comm::CommOptions options;
  auto memory = test_support::record_into(options);
  run_thread_ranks(3, [&](Communicator& comm) {
    const int right = (comm.rank() + 1) % 3, left = (comm.rank() + 2) % 3;
    for (int i = 0; i < 4; ++i) {
      auto out = torch::ones({16});
      auto in = torch::empty({16});
      auto s = comm.isend(out, right, i % 2);
      comm.recv(in, left, i % 2);
      s->wait();
    }
  }, options);
  std::map<uint64_t, std::vector<trace::Event>> by_flow;
  for (const auto& e : memory->events()) by_flow[e.flow].push_back(e);
  ASSERT_EQ(by_flow.size(), 12u);  // 3 ranks x 4 messages, all distinct
  for (const auto& [flow, pair] : by_flow) {
    ASSERT_EQ(pair.size(), 2u);
    const auto& send = pair[0].category == "send" ? pair[0] : pair[1];
    const auto& recv = pair[0].category == "send" ? pair[1] : pair[0];
    EXPECT_EQ(send.category, "send");
    EXPECT_EQ(recv.category, "recv");
    EXPECT_EQ(send.peer, recv.rank);
    EXPECT_EQ(recv.peer, send.rank);
    EXPECT_EQ(send.bytes, 64);
    EXPECT_EQ(send.arg("tag"), recv.arg("tag"));
  }
}

}  // namespace
}  // namespace distlab::comm
