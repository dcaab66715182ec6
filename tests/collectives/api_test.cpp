// The collectives' calling forms (in place, out of place, non-contiguous,
// native), the naive reference, the trace they leave, their errors, two
// collectives in flight at once, and calibration.
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <map>
#include <thread>

#include "collectives/calibrate.hpp"
#include "collectives/collectives.hpp"
#include "collectives/naive.hpp"
#include "collectives/tags.hpp"
#include "comm/threads_backend.hpp"
#include "sweep.hpp"

namespace distlab::collectives {
namespace {

using namespace testing;  // the helpers of sweep.hpp

comm::CommOptions short_timeout(int ms = 20000) {
  comm::CommOptions options;
  options.timeout = comm::Milliseconds(ms);
  return options;
}

// Runs body on p thread ranks and fails the test with the first error.
void run_ranks(int p, const std::function<void(Communicator&)>& body, comm::CommOptions options = short_timeout()) {
  try {
    comm::run_thread_ranks(p, body, options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "p=" << p << ": " << e.what();
  }
}

// The message run_thread_ranks fails with ("" if none), and how long it took.
std::pair<std::string, double> failure_of(int p, const std::function<void(Communicator&)>& body, int timeout_ms) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    comm::run_thread_ranks(p, body, short_timeout(timeout_ms));
  } catch (const std::exception& e) {
    message = e.what();
  }
  return {message, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// ------------------------------------------------------- naive reference

// The naive versions combine in rank order, as the threads backend's native
// ones do: the two agree bit for bit, floats included.
TEST(Naive, EqualsNativeExactly) {
  for (int p : {1, 2, 3, 5, 8}) {
    Failures failures;
    run_ranks(p, [&](Communicator& comm) {
      int salt = 0;
      for (at::ScalarType dtype : {at::kFloat, at::kLong})
        for (int64_t count : {0, 1, 1000})
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
            const at::Tensor input = input_for(comm.rank(), count, dtype, ++salt);
            const std::string what = "p=" + std::to_string(p) + " rank " + std::to_string(comm.rank()) + " " +
                                     c10::toString(dtype) + " count " + std::to_string(count) + " " +
                                     comm::to_string(op);
            for (int root = 0; root < p; ++root) {
              at::Tensor native = input.clone(), naive_result = input.clone();
              comm.native_reduce(native, root, op);
              naive::reduce(comm, naive_result, root, op);
              if (comm.rank() == root)
                expect_close(failures, what + " reduce root " + std::to_string(root), naive_result, native, 0.0);
              native = input.clone();
              naive_result = input.clone();
              comm.native_broadcast(native, root);
              naive::broadcast(comm, naive_result, root);
              expect_close(failures, what + " broadcast root " + std::to_string(root), naive_result, native, 0.0);
            }
            at::Tensor native = input.clone(), naive_result = input.clone();
            comm.native_all_reduce(native, op);
            naive::all_reduce(comm, naive_result, op);
            expect_close(failures, what + " all_reduce", naive_result, native, 0.0);
          }
    });
    EXPECT_EQ(failures.count(), 0) << failures.report();
  }
}

// ------------------------------------------------------------ call forms

// Out of place: input untouched, output bit for bit what the in-place call
// gives. Non-contiguous tensors: the same values as contiguous ones.
TEST(CallForms, OutOfPlaceAndNonContiguousMatchInPlace) {
  for (int p : {1, 3, 4}) {
    Failures failures;
    run_ranks(p, [&](Communicator& comm) {
      const int me = comm.rank();
      const int64_t count = 1001;
      const at::Tensor input = input_for(me, count, at::kFloat, 5);
      const at::Tensor saved = input.clone();
      const Range mine = chunk_range(count, p, me);
      const std::string at_rank = "p=" + std::to_string(p) + " rank " + std::to_string(me) + " ";

      for (Algorithm algorithm : algorithms_for(Collective::kAllReduce)) {
        at::Tensor in_place = input.clone(), output = at::empty({7, 143});
        all_reduce(comm, in_place, ReduceOp::kSum, algorithm);
        all_reduce(comm, input, output, ReduceOp::kSum, algorithm);
        expect_close(failures, at_rank + "all_reduce out of place " + to_string(algorithm), output.view({-1}), in_place,
                     0.0);
        // (143, 7) transposed: the same 1001 values, not contiguous.
        at::Tensor strided = input.view({7, 143}).t().contiguous().t();
        ASSERT_FALSE(strided.is_contiguous());
        all_reduce(comm, strided, ReduceOp::kSum, algorithm);
        expect_close(failures, at_rank + "all_reduce non-contiguous " + to_string(algorithm), strided.reshape({-1}),
                     in_place, 0.0);
      }
      for (Algorithm algorithm : algorithms_for(Collective::kReduce)) {
        at::Tensor in_place = input.clone(), output = at::empty({count});
        reduce(comm, in_place, p - 1, ReduceOp::kMax, algorithm);
        reduce(comm, input, output, p - 1, ReduceOp::kMax, algorithm);
        if (me == p - 1) expect_close(failures, at_rank + "reduce out of place", output, in_place, 0.0);
      }
      for (Algorithm algorithm : algorithms_for(Collective::kBroadcast)) {
        at::Tensor in_place = input.clone(), output = at::empty({count});
        broadcast(comm, in_place, 0, algorithm);
        broadcast(comm, input, output, 0, algorithm);
        expect_close(failures, at_rank + "broadcast out of place", output, in_place, 0.0);
      }
      at::Tensor whole = input.clone(), chunk = at::empty({mine.count});
      const at::Tensor in_place_chunk = reduce_scatter(comm, whole, ReduceOp::kAvg);
      reduce_scatter(comm, input, chunk, ReduceOp::kAvg);
      expect_close(failures, at_rank + "reduce_scatter out of place", chunk, in_place_chunk, 0.0);

      at::Tensor gathered = at::empty({count});
      all_gather(comm, input.narrow(0, mine.offset, mine.count), gathered);
      at::Tensor in_place_gathered = input.clone();
      all_gather(comm, in_place_gathered);
      expect_close(failures, at_rank + "all_gather out of place", gathered, in_place_gathered, 0.0);

      expect_close(failures, at_rank + "input untouched", input, saved, 0.0);
    });
    EXPECT_EQ(failures.count(), 0) << failures.report();
  }
}

// Algorithm::kNative runs the backend's own collective (all-reduce standing
// in for reduce-scatter and all-gather): the same results as the plans.
TEST(CallForms, NativeDispatchGivesTheSameResults) {
  const int p = 5;
  Failures failures;
  run_ranks(p, [&](Communicator& comm) {
    const int me = comm.rank();
    const int64_t count = 103;
    const at::Tensor input = input_for(me, count, at::kDouble, 9);
    const double tol = tolerance(at::kDouble, p, ReduceOp::kSum);
    const std::string at_rank = "rank " + std::to_string(me) + " ";
    at::Tensor a = input.clone(), b = input.clone();
    all_reduce(comm, a, ReduceOp::kSum, Algorithm::kNative);
    all_reduce(comm, b, ReduceOp::kSum, Algorithm::kRing);
    expect_close(failures, at_rank + "all_reduce", a, b, tol);
    a = input.clone(), b = input.clone();
    reduce(comm, a, 2, ReduceOp::kSum, Algorithm::kNative);
    reduce(comm, b, 2, ReduceOp::kSum, Algorithm::kTree);
    if (me == 2) expect_close(failures, at_rank + "reduce", a, b, tol);
    a = input.clone(), b = input.clone();
    broadcast(comm, a, 3, Algorithm::kNative);
    broadcast(comm, b, 3, Algorithm::kTree);
    expect_close(failures, at_rank + "broadcast", a, b, 0.0);
    a = input.clone(), b = input.clone();
    const at::Tensor native_chunk = reduce_scatter(comm, a, ReduceOp::kSum, Algorithm::kNative);
    const at::Tensor ring_chunk = reduce_scatter(comm, b, ReduceOp::kSum, Algorithm::kRing);
    expect_close(failures, at_rank + "reduce_scatter", native_chunk, ring_chunk, tol);
    a = input.clone(), b = input.clone();
    all_gather(comm, a, Algorithm::kNative);
    all_gather(comm, b, Algorithm::kRing);
    expect_close(failures, at_rank + "all_gather", a, b, 0.0);
  });
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ----------------------------------------------------------------- trace

// One "step" event per plan step per rank, nested in one "collective" event;
// every send pairs with exactly one recv through its flow id; as many sends
// as the plan has transfers.
TEST(Trace, EveryStepOnEveryRankAndSendsPairWithRecvs) {
  struct Case {
    int p;
    Algorithm algorithm;
    int64_t count;
  };
  for (const Case& c : {Case{4, Algorithm::kRing, 1000}, Case{5, Algorithm::kHalvingDoubling, 37},
                        Case{6, Algorithm::kReduceBroadcast, 3}}) {
    auto recorder = std::make_shared<trace::Recorder>();
    auto sink = std::make_shared<trace::MemorySink>();
    recorder->add_sink(sink);
    comm::CommOptions options = short_timeout();
    options.recorder = recorder;
    run_ranks(
        c.p,
        [&](Communicator& comm) {
          at::Tensor t = input_for(comm.rank(), c.count, at::kFloat, 1);
          all_reduce(comm, t, ReduceOp::kSum, c.algorithm, /*tag=*/3);
        },
        options);

    const Plan plan = make_plan(Collective::kAllReduce, c.algorithm, c.p, c.count);
    size_t transfers = 0;
    for (const Step& step : plan.steps) transfers += step.transfers.size();
    const std::string name = to_string(c.algorithm);

    std::map<int, std::vector<trace::Event>> steps, collectives;
    std::map<uint64_t, int> send_flows, recv_flows;
    for (const trace::Event& e : sink->events()) {
      if (e.category == "step") steps[e.rank].push_back(e);
      if (e.category == "collective") collectives[e.rank].push_back(e);
      if (e.category == "send") ++send_flows[e.flow];
      if (e.category == "recv") ++recv_flows[e.flow];
    }
    for (int r = 0; r < c.p; ++r) {
      ASSERT_EQ(steps[r].size(), plan.steps.size()) << name << " rank " << r;
      ASSERT_EQ(collectives[r].size(), 1u) << name << " rank " << r;
      const trace::Event& whole = collectives[r][0];
      EXPECT_EQ(whole.arg("algorithm"), name);
      std::vector<bool> seen(plan.steps.size(), false);
      for (const trace::Event& e : steps[r]) {
        EXPECT_EQ(e.arg("algorithm"), name);
        EXPECT_EQ(e.lane, trace::kLaneComm);
        const size_t s = std::stoul(e.arg("step", "999"));
        ASSERT_LT(s, plan.steps.size());
        seen[s] = true;
        EXPECT_EQ(e.arg("tag"), std::to_string(step_tag(3, s)));
        EXPECT_GE(e.begin_us, whole.begin_us);
        EXPECT_LE(e.end_us, whole.end_us);
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(plan.steps.size()));
    }
    EXPECT_EQ(send_flows.size(), transfers) << name;
    EXPECT_EQ(send_flows, recv_flows) << name;
    for (const auto& [flow, n] : send_flows) EXPECT_EQ(n, 1) << name << " flow " << flow;
  }
}

// ---------------------------------------------------------------- errors

TEST(Errors, MismatchedCountsFailFastWithAClearMessage) {
  for (Algorithm algorithm : {Algorithm::kTree, Algorithm::kRing, Algorithm::kHalvingDoubling}) {
    const auto [message, seconds] = failure_of(
        3,
        [&](Communicator& comm) {
          at::Tensor t = at::ones({comm.rank() == 2 ? 13 : 10});
          if (algorithm == Algorithm::kTree)
            broadcast(comm, t, 0, algorithm);
          else
            all_reduce(comm, t, ReduceOp::kSum, algorithm);
        },
        /*timeout_ms=*/3000);
    EXPECT_NE(message.find("elements"), std::string::npos) << message;
    EXPECT_NE(message.find(to_string(algorithm)), std::string::npos) << message;
    EXPECT_NE(message.find("same element count"), std::string::npos) << message;
    EXPECT_LT(seconds, 3.0) << "found by the timeout, not by the size check: " << message;
  }
}

TEST(Errors, ARankThatNeverJoinsTimesOutNamingIt) {
  const auto [message, seconds] = failure_of(
      3,
      [](Communicator& comm) {
        if (comm.rank() == 2) return;  // never calls the collective
        at::Tensor t = at::ones({100});
        all_reduce(comm, t, ReduceOp::kSum, Algorithm::kRing);
      },
      /*timeout_ms=*/500);
  EXPECT_NE(message.find("did not complete within 500 ms"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
  EXPECT_NE(message.find("step 0"), std::string::npos) << message;
  EXPECT_LT(seconds, 5.0);
}

TEST(Errors, BadArgumentsAreRefusedBeforeAnyMessage) {
  run_ranks(2, [](Communicator& comm) {
    at::Tensor t = at::ones({10}), wrong = at::empty({9});
    EXPECT_THROW(all_reduce(comm, t, ReduceOp::kSum, Algorithm::kSequential), std::invalid_argument);
    EXPECT_THROW(reduce_scatter(comm, t, ReduceOp::kSum, Algorithm::kTree), std::invalid_argument);
    EXPECT_THROW(all_reduce(comm, t, ReduceOp::kSum, Algorithm::kRing, /*tag=*/-1), std::invalid_argument);
    EXPECT_THROW(broadcast(comm, t, /*root=*/2), std::invalid_argument);
    try {
      reduce_scatter(comm, t, wrong, ReduceOp::kSum);
      ADD_FAILURE() << "no exception";
    } catch (const comm::CommError& e) {
      EXPECT_NE(std::string(e.what()).find("output has 9 elements, expected 5"), std::string::npos) << e.what();
    }
    at::Tensor undefined;
    EXPECT_THROW(all_reduce(comm, undefined), comm::CommError);
  });
}

// ------------------------------------------------------- tags in flight

// Each rank runs two all-reduces at once from two threads over the same
// communicator, many times. With the same tag their messages would cross
// (same peers, same sizes); with distinct tags each gets its own sum.
TEST(Tags, TwoCollectivesInFlightDoNotCross) {
  const int p = 4;
  const int64_t count = 999;
  Failures failures;
  run_ranks(p, [&](Communicator& comm) {
    const int me = comm.rank();
    at::Tensor want_a = at::zeros({count}, at::kDouble), want_b = at::zeros({count}, at::kDouble);
    for (int r = 0; r < p; ++r) {
      want_a += input_for(r, count, at::kDouble, 1);
      want_b += input_for(r, count, at::kDouble, 2).mul(100);
    }
    for (int round = 0; round < 20; ++round) {
      at::Tensor a = input_for(me, count, at::kDouble, 1), b = input_for(me, count, at::kDouble, 2).mul(100);
      std::exception_ptr error;
      std::thread other([&] {
        try {
          all_reduce(comm, a, ReduceOp::kSum, Algorithm::kRing, /*tag=*/1);
        } catch (...) {
          error = std::current_exception();
        }
      });
      all_reduce(comm, b, ReduceOp::kSum, Algorithm::kRing, /*tag=*/2);
      other.join();
      if (error) std::rethrow_exception(error);
      expect_close(failures, "round " + std::to_string(round) + " a", a, want_a, 1e-9);
      expect_close(failures, "round " + std::to_string(round) + " b", b, want_b, 1e-9);
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ----------------------------------------------------------- calibration

TEST(Calibrate, EveryRankGetsRankZerosPositiveMeasurement) {
  const int p = 3;
  std::vector<LinkParams> seen(p);
  run_ranks(p, [&](Communicator& comm) {
    CalibrationOptions options;
    options.iterations = 5;
    options.large_bytes = 1 << 20;
    seen[comm.rank()] = calibrate(comm, options);
  });
  EXPECT_GT(seen[0].alpha_s, 0.0);
  EXPECT_LT(seen[0].alpha_s, 1.0);
  EXPECT_GT(seen[0].beta_s_per_byte, 0.0);
  EXPECT_LT(seen[0].beta_s_per_byte, 1e-3);
  for (int r = 1; r < p; ++r) {
    EXPECT_EQ(seen[r].alpha_s, seen[0].alpha_s);
    EXPECT_EQ(seen[r].beta_s_per_byte, seen[0].beta_s_per_byte);
  }
  run_ranks(1, [](Communicator& comm) {
    const LinkParams alone = calibrate(comm);
    EXPECT_EQ(alone.alpha_s, 0.0);
    EXPECT_EQ(alone.beta_s_per_byte, 0.0);
  });
}

}  // namespace
}  // namespace distlab::collectives
