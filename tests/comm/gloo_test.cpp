// The gloo backend across processes: jobs started by the built distlab-run
// with comm_gloo_worker, each rank checking what it received against values
// it derives on its own (see gloo_worker.cpp), and the failure paths.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>

#include "launcher_process.hpp"
#include "support/free_port.hpp"
#include "worker_runs.hpp"

namespace {

using namespace std::chrono_literals;
using distlab::comm::testing::expect_every_rank_passed;
using distlab::comm::testing::run_worker;
using distlab::launcher::testing::Finished;
using distlab::launcher::testing::run_launcher;

class GlooJob : public testing::TestWithParam<int> {};

TEST_P(GlooJob, RanksExchangeDataAndAgree) {
  const int ranks = GetParam();
  expect_every_rank_passed(run_worker(ranks, "exchange"), ranks);
}

INSTANTIATE_TEST_SUITE_P(Processes, GlooJob, testing::Values(2, 3, 4));

// The job's settle() frees what a group's sends still held (a memory
// measurement reads the meter after it): see the worker's settle().
TEST(GlooJobs, SettleWaitsForTheSendsOfEveryGroup) {
  Finished f = run_worker(3, "settle");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("after settle() the group's send holds less than 1 KiB"), std::string::npos) << f.out << f.err;
  EXPECT_EQ(f.out.find("MISMATCH"), std::string::npos) << f.out;
}

// Three jobs one after the other in the same processes, rank 0 (the store's
// host) the last to leave each: the others reach the next rendezvous while
// the last one is still up, and must meet the new job, not the old one's keys.
TEST(GlooJobs, JobsRunOneAfterAnotherInTheSameProcessesMeetAfresh) {
  Finished f = run_worker(3, "exchange", "20000", 3);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  for (int r = 0; r < 3; ++r) {
    const std::string line = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + " of 3: all checks passed";
    size_t count = 0;
    for (size_t at = f.out.find(line); at != std::string::npos; at = f.out.find(line, at + 1)) ++count;
    EXPECT_EQ(count, 3u) << "rank " << r << " passed " << count << " of 3 jobs\n" << f.out << f.err;
  }
}

// comm::wait_for_rank: the others wait for rank 0 three times the timeout
// (500 ms) without failing, and the job goes on.
TEST(GlooJobs, WaitForRankOutlastsTheTimeout) {
  Finished f = run_worker(3, "person-wait", "500");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  for (int r = 1; r < 3; ++r) {
    const std::string prefix = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + " waited ";
    const auto at = f.out.find(prefix);
    ASSERT_NE(at, std::string::npos) << f.out << f.err;
    EXPECT_GE(std::stoi(f.out.substr(at + prefix.size())), 1400) << f.out;
  }
}

TEST(GlooFailures, SilentPeerTimesOutNamingIt) {
  Finished f = run_worker(3, "silent-peer", "1500");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0);
  const std::string all = f.out + f.err;
  EXPECT_NE(all.find("rank 0: recv from rank 2 (tag 3) did not complete within 1500 ms"), std::string::npos) << all;
  EXPECT_NE(all.find("distlab-run: rank 0"), std::string::npos) << all;
}

TEST(GlooFailures, CrashedPeerIsReportedAndTheJobStops) {
  Finished f = run_worker(3, "crash");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0);
  const std::string all = f.out + f.err;
  EXPECT_NE(all.find("rank 2"), std::string::npos) << all;
  EXPECT_NE(all.find("exited with code 7"), std::string::npos) << all;
  EXPECT_LT(f.seconds, 60) << "the launcher must stop the others, not wait for their timeout";
}

// A message that does not fit its recv is refused on the receiving rank naming
// both shapes, shorter (gloo would fill part of the tensor) or longer (gloo
// would end the process on an assertion in its network thread); the next
// message on the tag arrives intact; an uncaught refusal ends the job with
// its line and lands in the rank's flight record.
TEST(GlooFailures, AMessageThatDoesNotFitIsRefusedNamingBothShapes) {
  const std::string flight_dir = distlab::launcher::testing::fresh_dir("gloo_mismatch_flight");
  setenv("DISTLAB_FLIGHT_DIR", flight_dir.c_str(), 1);
  Finished f = run_worker(2, "mismatch", "20000");
  unsetenv("DISTLAB_FLIGHT_DIR");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0) << f.out << f.err;
  const std::string all = f.out + f.err;
  EXPECT_EQ(all.find("MISMATCH"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 1: three messages refused, the next one intact"), std::string::npos) << all;
  const std::string last = "rank 1: recv from rank 0 (tag 6): rank 0 sent 8 Float elements but the recv expects 4 "
                           "Float elements";
  EXPECT_NE(all.find("[rank 1] error: " + last), std::string::npos) << all;
  EXPECT_EQ(all.find("enforce fail"), std::string::npos) << all;
  const std::string record = distlab::launcher::testing::read_file(flight_dir + "/flight.rank1.json");
  EXPECT_NE(record.find("\"error\": \"" + last + "\""), std::string::npos) << record;
}

// Runs the worker alone (no launcher) with `env` set; output and exit code.
std::pair<int, std::string> run_alone(const std::string& env) {
  const std::string command = env + " timeout 60 " + GLOO_WORKER_PATH + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(GlooFailures, UnreachableMasterGivesOneClearLine) {
  const int port = distlab::test_support::free_port();  // nobody listens there
  auto [code, out] = run_alone("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                               " DISTLAB_CONNECT_TIMEOUT_MS=1500");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("rank 1: cannot reach the master at 127.0.0.1:" + std::to_string(port) + " within 1500 ms"),
            std::string::npos) << out;
}

TEST(GlooFailures, BadEnvironmentGivesOneClearLine) {
  auto [code, out] = run_alone("RANK=4 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("RANK"), std::string::npos) << out;
  EXPECT_NE(out.find("WORLD_SIZE"), std::string::npos) << out;
  auto [code2, out2] = run_alone("RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 DISTLAB_TIMEOUT_MS=soon");
  EXPECT_EQ(code2, 1) << out2;
  EXPECT_NE(out2.find("DISTLAB_TIMEOUT_MS must be a positive number"), std::string::npos) << out2;
}

}  // namespace
