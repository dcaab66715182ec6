// The executor on thread ranks: every schedule equal to the unsplit model
// with 2 and 4 stages, and a stage that dies mid-step makes its neighbours
// fail within their timeout, naming the action and the peer.
#include <gtest/gtest.h>

#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/loss.h>

#include <chrono>
#include <mutex>

#include "comm/threads_backend.hpp"
#include "exec_checks.hpp"
#include "pipeline/executor.hpp"

namespace distlab::pipeline {
namespace {

using namespace std::chrono_literals;

class ThreadStages : public ::testing::TestWithParam<int> {};

TEST_P(ThreadStages, EveryScheduleEqualsTheUnsplitModel) {
  std::mutex mutex;
  std::vector<std::string> failures;
  comm::run_thread_ranks(GetParam(), [&](comm::Communicator& comm) {
    auto f = testing::check_against_unsplit(comm);
    std::lock_guard<std::mutex> lock(mutex);
    failures.insert(failures.end(), f.begin(), f.end());
  });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadStages, ::testing::Values(2, 4));

// Two stages of one Linear each; stage 1 misbehaves at microbatch 2.
struct Failure {
  std::string rank0_error;
  double rank0_seconds = 0;
  std::string job_error;  // what run_thread_ranks rethrew
};

// A stage that throws aborts the job: its neighbour waits with a timeout
// far beyond kHangSeconds, so only the abort can end its wait in time.
// One that vanishes says nothing: its neighbour's 500 ms timeout ends it.
Failure run_with_broken_stage_1(bool throws) {
  Failure out;
  comm::CommOptions options;
  options.timeout = throws ? std::chrono::milliseconds(120s) : std::chrono::milliseconds(500ms);
  try {
    comm::run_thread_ranks(2, [&](comm::Communicator& comm) {
      torch::nn::Linear layer(4, 4);
      StageModule stage = stage_of(layer);
      int calls = 0;
      if (comm.rank() == 1) {
        auto forward = stage.forward;
        stage.forward = [&, forward](const at::Tensor& x) {
          if (++calls == 3) {
            if (throws) throw std::runtime_error("stage 1 broke at microbatch 2");
            throw std::logic_error("silent");  // caught below: rank 1 just stops
          }
          return forward(x);
        };
      }
      ExecutorOptions o;
      o.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::nn::functional::mse_loss(y, t); };
      PipelineExecutor pipe(comm, make_schedule(ScheduleKind::kGPipe, 2, 4), {stage}, o);
      const auto start = std::chrono::steady_clock::now();
      try {
        pipe.step(at::ones({8, 4}), at::zeros({8, 4}));
      } catch (const std::logic_error&) {
        return;  // rank 1 leaves without a word: no abort reaches rank 0
      } catch (const std::exception& e) {
        if (comm.rank() == 0) {
          out.rank0_error = e.what();
          out.rank0_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
        throw;
      }
    }, options);
  } catch (const std::exception& e) {
    out.job_error = e.what();
  }
  return out;
}

// Far above the 500 ms timeout and far below the 120 s one: the bound
// only says rank 0 did not hang (and, with 120 s, that the abort woke it).
// What stopped it is read from its error.
constexpr double kHangSeconds = 30.0;

TEST(StageFailure, AStageThatThrowsStopsItsNeighbourNamingActionAndPeer) {
  const Failure f = run_with_broken_stage_1(/*throws=*/true);
  // Rank 1 breaks on microbatch 2, once rank 0 has sent it. The abort then
  // reaches rank 0 either as it posts the last forward's send (a post checks
  // for an abort) or while it waits for the first gradient: which of the two
  // is a race between the ranks, and both name the action and the peer.
  const bool at_last_send = f.rank0_error.find("pipeline action 0SEND_F3") != std::string::npos;
  const bool at_first_gradient = f.rank0_error.find("pipeline action 0RECV_B0") != std::string::npos;
  EXPECT_TRUE(at_last_send || at_first_gradient) << f.rank0_error << f.job_error;
  EXPECT_NE(f.rank0_error.find("peer rank 1"), std::string::npos) << f.rank0_error;
  EXPECT_NE(f.rank0_error.find("job aborted"), std::string::npos) << "stopped by the abort: " << f.rank0_error;
  EXPECT_LT(f.rank0_seconds, kHangSeconds);
}

TEST(StageFailure, AStageThatVanishesTimesOutItsNeighbourNamingActionAndPeer) {
  const Failure f = run_with_broken_stage_1(/*throws=*/false);
  EXPECT_NE(f.rank0_error.find("pipeline action 0RECV_B0"), std::string::npos) << f.rank0_error << f.job_error;
  EXPECT_NE(f.rank0_error.find("peer rank 1"), std::string::npos) << f.rank0_error;
  EXPECT_NE(f.rank0_error.find("500 ms"), std::string::npos) << "stopped by its timeout: " << f.rank0_error;
  EXPECT_LT(f.rank0_seconds, kHangSeconds);
}

TEST(Executor, RefusesASchedulThatDoesNotFit) {
  comm::run_thread_ranks(2, [&](comm::Communicator& comm) {
    torch::nn::Linear layer(4, 4);
    ExecutorOptions o;
    o.loss = [](const at::Tensor& y, const at::Tensor& t) { return torch::nn::functional::mse_loss(y, t); };
    EXPECT_THROW(PipelineExecutor(comm, make_schedule(ScheduleKind::kGPipe, 3, 4), {stage_of(layer)}, o), ScheduleError);
    EXPECT_THROW(PipelineExecutor(comm, make_schedule(ScheduleKind::kLoopedBFS, 2, 4, 2), {stage_of(layer)}, o),
                 ScheduleError);
  });
}

}  // namespace
}  // namespace distlab::pipeline
