// The same-host transport (--backend auto, comm/same_host_backend.hpp):
// the gloo tests' worker over shared memory, in one copy and in two, with
// rings small enough that every large message wraps round many times; two
// jobs on the host at once; and segments of a dead job removed by the next
// one. Its faults: shm_faults_test.cpp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <chrono>
#include <cstdlib>
#include <future>

#include "launcher_process.hpp"
#include "worker_runs.hpp"
#include "support/process_backend.hpp"
#include "support/required_tool.hpp"

namespace {

using namespace std::chrono_literals;
using distlab::launcher::testing::Finished;
using distlab::testing::ScopedEnv;

using distlab::comm::testing::expect_every_rank_passed;

Finished run_shm(int ranks, const std::string& scenario, const std::string& timeout_ms = "60000",
                 const std::vector<std::string>& more = {}) {
  return distlab::comm::testing::run_worker(ranks, scenario, timeout_ms, 1, "auto", more);
}

// By default one copy (process_vm_readv works here as root) from 4 MiB, two
// copies below: the exchange's 6 MiB messages go in one, the rest in two.
class ShmJob : public testing::TestWithParam<int> {};

TEST_P(ShmJob, RanksExchangeDataAndAgree) {
  const int ranks = GetParam();
  Finished f = run_shm(ranks, "exchange");
  expect_every_rank_passed(f, ranks);
  EXPECT_NE(f.err.find(std::to_string(ranks) +
                       " rank(s) on this host talk through shared memory (one copy (process_vm_readv) from 4 MiB, "
                       "two copies through the ring below)"),
            std::string::npos)
      << f.err;
}

// Every byte through the ring, and a ring of 4 KiB: a 6 MiB message goes
// round it some 1,500 times, header and bytes split wherever the end falls.
TEST(ShmJobs, RanksExchangeDataAndAgreeInTwoCopiesThroughATinyRing) {
  const int ranks = 3;
  ScopedEnv two_copies("DISTLAB_SHM_SINGLE_COPY", "0");
  ScopedEnv tiny_ring("DISTLAB_SHM_RING_KB", "4");
  Finished f = run_shm(ranks, "exchange");
  expect_every_rank_passed(f, ranks);
  EXPECT_NE(f.err.find("talk through shared memory (two copies through the ring (one copy turned off))"),
            std::string::npos)
      << f.err;
}

INSTANTIATE_TEST_SUITE_P(Processes, ShmJob, testing::Values(2, 4));

// Every message from 64 KiB on in one copy (the exchange's 1 MiB ones too).
TEST(ShmJobs, RanksExchangeDataAndAgreeInOneCopyAtEverySize) {
  ScopedEnv one_copy("DISTLAB_SHM_SINGLE_COPY", "1");
  Finished f = run_shm(3, "exchange");
  expect_every_rank_passed(f, 3);
  EXPECT_NE(f.err.find("(one copy (process_vm_readv) from 64 KiB, two copies through the ring below)"),
            std::string::npos)
      << f.err;
}

// The rings' head and tail as the trace records them (what distlab-viz's
// Wire panel draws): a 64 KiB ring, two copies, 1 MiB and smaller messages.
TEST(ShmJobs, TheTraceCountsEveryByteThroughTheRing) {
  ScopedEnv two_copies("DISTLAB_SHM_SINGLE_COPY", "0");
  ScopedEnv small_ring("DISTLAB_SHM_RING_KB", "64");
  Finished f = run_shm(2, "ring-trace");
  expect_every_rank_passed(f, 2);
  const int64_t all = 4 * ((1 << 18) + 3 + 0 + 100000) + 4 * 48;
  EXPECT_NE(f.out.find("head at the end " + std::to_string(all) + " bytes"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("tail at the end " + std::to_string(all) + " bytes"), std::string::npos) << f.out;
}

TEST(ShmJobs, SettleWaitsForTheSendsOfEveryGroup) {
  Finished f = run_shm(3, "settle");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("after settle() the group's send holds less than 1 KiB"), std::string::npos) << f.out << f.err;
}

TEST(ShmFailures, AMessageThatDoesNotFitIsRefusedNamingBothShapes) {
  Finished f = run_shm(2, "mismatch", "20000");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0) << f.out << f.err;
  const std::string all = f.out + f.err;
  EXPECT_EQ(all.find("MISMATCH"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 1: three messages refused, the next one intact"), std::string::npos) << all;
  EXPECT_NE(all.find("[rank 1] error: rank 1: recv from rank 0 (tag 6): rank 0 sent 8 Float elements but the recv "
                     "expects 4 Float elements"),
            std::string::npos)
      << all;
}

TEST(ShmFailures, SilentPeerTimesOutNamingIt) {
  Finished f = run_shm(3, "silent-peer", "1500");
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0);
  const std::string all = f.out + f.err;
  EXPECT_NE(all.find("rank 0: recv from rank 2 (tag 3) did not complete within 1500 ms"), std::string::npos) << all;
}

// Two jobs of 3 ranks at once, each with its own salt in every value it
// sends (a message of the other job fails its check) and printing it. Each
// job's rank 0, once its ranks are connected, creates a file and waits for
// the other job's before either exchanges anything: both ran at once.
TEST(ShmJobs, TwoJobsOnOneHostStayApart) {
  const std::string dir = distlab::launcher::testing::fresh_dir("shm_two_jobs");
  auto job = [&](int salt, int other) {
    return run_shm(3, "exchange", "60000",
                   {"--salt", std::to_string(salt), "--started", dir + "/started." + std::to_string(salt), "--await",
                    dir + "/started." + std::to_string(other)});
  };
  auto first = std::async(std::launch::async, [&] { return job(1, 2); });
  auto second = std::async(std::launch::async, [&] { return job(2, 1); });
  const Finished jobs[2] = {first.get(), second.get()};
  for (int j = 0; j < 2; ++j) {
    const std::string mine = std::to_string(j + 1), theirs = std::to_string(2 - j);
    expect_every_rank_passed(jobs[j], 3);
    EXPECT_NE(jobs[j].out.find("[rank 0] rank 0: job salt " + mine + " met the other job"), std::string::npos)
        << jobs[j].out;
    for (int r = 0; r < 3; ++r)
      EXPECT_NE(jobs[j].out.find("[rank " + std::to_string(r) + "] rank " + std::to_string(r) + ": job salt " + mine +
                                 "\n"),
                std::string::npos)
          << jobs[j].out;
    EXPECT_EQ(jobs[j].out.find("job salt " + theirs), std::string::npos) << jobs[j].out;
  }
}

// Two hosts made on this machine (tests/comm/two_hosts.sh: a network and a
// UTS namespace each, a veth pair between them, a /dev/shm of their own), 2
// ranks on each: --backend auto must find the ranks of each host by their
// host identity, talk through shared memory inside each and through TCP
// between them, and every check passes.
TEST(ShmTwoHosts, SharedMemoryInsideEachHostAndTcpBetweenThem) {
  const std::string command = std::string("DISTLAB_RUN=") + DISTLAB_BUILD_DIR + "/launcher/distlab-run " +
                              DISTLAB_SOURCE_DIR + "/tests/comm/two_hosts.sh --nproc-per-node 2 --timeout 100 -- " +
                              GLOO_WORKER_PATH + " --backend auto --scenario exchange 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char chunk[4096];
  for (size_t n; (n = fread(chunk, 1, sizeof chunk, pipe)) > 0;) out.append(chunk, n);
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  DISTLAB_SKIP_OR_FAIL_WITHOUT(code != 77, "this machine cannot make two hosts: " + out);
  EXPECT_EQ(code, 0) << out;
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(out.find("rank " + std::to_string(r) + " of 4: all checks passed"), std::string::npos) << out;
  EXPECT_EQ(out.find("MISMATCH"), std::string::npos) << out;
  const std::string split =
      "2 rank(s) on this host talk through shared memory (one copy (process_vm_readv) from 4 "
      "MiB, two copies through the ring below), 2 elsewhere through TCP";
  const size_t first = out.find(split), host1 = out.find("== host1 ==");
  EXPECT_LT(first, host1) << out;
  EXPECT_NE(out.find(split, host1), std::string::npos) << out;
}

// A job that died before it unlinked its segments: a segment named as the
// transport names them, by a process that no longer exists, and one by a
// process that does (this one). The next job's set-up removes the first and
// leaves the second alone.
TEST(ShmSegments, TheNextJobRemovesADeadJobsSegmentAndLeavesALiveOnesAlone) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string dead = "/distlab." + std::to_string(child) + ".0123456789abcdef.0123456789abcdef.r0";
  const std::string alive = "/distlab." + std::to_string(getpid()) + ".fedcba9876543210.0123456789abcdef.r1";
  for (const std::string& name : {dead, alive}) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << name;
    close(fd);
  }
  expect_every_rank_passed(run_shm(2, "agree", "20000"), 2);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + dead));
  EXPECT_TRUE(std::filesystem::exists("/dev/shm" + alive));
  shm_unlink(dead.c_str());
  shm_unlink(alive.c_str());
}

}  // namespace
