// Who hosts the rendezvous store, seen from outside: a stand-in for
// torchrun's agent hosts a TCPStore here, and two real ranks (lesson 05)
// must join it as clients under /worker/attempt_<restart count>; and a rank
// that reaches a rank 0 of another attempt is told so, by name, instead of
// joining a job that is ending.
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <regex>

#include "run_command.hpp"
#include "support/free_port.hpp"

namespace distlab::train {
namespace {

using testing::contains;
using test_support::free_port;
using testing::run_command;
using testing::run_on_free_port;

const std::string kLesson05 = std::string(LESSON_05) + " --backend gloo --mb 1 --iters 1 --no-steps";

// Two ranks started side by side with `env0` / `env1` in front.
std::string two_ranks(const std::string& env0, const std::string& env1) {
  return "(" + env1 + " " + kLesson05 + " & " + env0 + " " + kLesson05 + "; wait)";
}

TEST(Store, RanksJoinTheAgentsStoreUnderTheirAttempt) {
  const int port = free_port();
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  auto agent = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                          " TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=3 DISTLAB_CONNECT_TIMEOUT_MS=20000";
  const auto r = run_command(two_ranks("RANK=0 " + env, "RANK=1 " + env), 60);
  EXPECT_FALSE(contains(r.output, "Address already in use")) << r.output;
  EXPECT_TRUE(contains(r.output, "Lesson 05: all-reduce  (gloo backend, 2 ranks, op sum)")) << r.output;
  static const std::regex row(R"(^  (reduce_broadcast|ring|halving_doubling|native)\s.*\s(\d+)$)");
  int rows = 0;
  for (const auto& line : testing::lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    ++rows;
    EXPECT_EQ(m[2], "0") << line;
  }
  EXPECT_EQ(rows, 4) << r.output;
  // Both ranks' keys are in the agent's store, under attempt 3 only, and
  // there under the process's first job (comm/store.cpp).
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(agent->check({"/worker/attempt_3/distlab/job0/distlab/joined/" + std::to_string(rank)})) << rank;
    EXPECT_FALSE(agent->check({"distlab/job0/distlab/joined/" + std::to_string(rank)})) << rank;
  }
}

TEST(Store, ARankOfAnotherAttemptIsToldSo) {
  const auto r = run_on_free_port(
      [&](const std::string& port) {
        const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " DISTLAB_CONNECT_TIMEOUT_MS=3000";
        return two_ranks("RANK=0 RESTART_COUNT=0 " + env, "RANK=1 RESTART_COUNT=1 " + env);
      },
      60);
  EXPECT_TRUE(contains(r.output, "rank 1: cannot reach the master at 127.0.0.1:")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 there is in attempt 0, this rank in attempt 1")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0: rank(s) 1 did not join")) << r.output;
}

}  // namespace
}  // namespace distlab::train
