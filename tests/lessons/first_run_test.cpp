// What a user meets on a first run, each checked as a user would run it:
// a process backend started alone, a master that is not there, a peer that
// died (not a mismatch), a second run of lesson 09 that finds checkpoints,
// counts in words, and help without CLI11's flag defaults.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "launcher_process.hpp"
#include "run_program.hpp"
#include "support/free_port.hpp"

namespace {

using distlab::launcher::testing::fresh_dir;
using distlab::test_support::free_port;
using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::run;

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

// No launcher's variables, whatever the test runner had.
const std::string kAlone = "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u SLURM_PROCID "
                           "-u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u DISTLAB_QUIET ";

TEST(FirstRun, AGlooRankStartedAloneSaysHowToStartTheOthers) {
  // A free port for the store it hosts: other tests may hold the default 29500 meanwhile.
  const Outcome r = run(kAlone + "MASTER_PORT=" + std::to_string(free_port()) + " " + LESSON_01 +
                        " --backend gloo --epochs 1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "no launcher's variables (RANK, WORLD_SIZE, ...): --backend gloo runs this process "
                                 "alone, a job of 1 rank; for N ranks start it as distlab-run --nproc-per-node N -- "
                                 "lesson_01_gradient_accumulation"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "(gloo backend, 1 rank)")) << r.output;

  // A world of one that was asked for is left alone.
  const Outcome asked = run(kAlone + "WORLD_SIZE=1 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                            std::to_string(free_port()) + " " + LESSON_01 + " --backend gloo --epochs 1");
  EXPECT_EQ(asked.status, 0) << asked.output;
  EXPECT_FALSE(contains(asked.output, "no launcher's variables")) << asked.output;
}

TEST(FirstRun, AnUnreachableMasterIsOneLineWithoutLibTorchsSocketLog) {
  const std::string port = std::to_string(free_port());
  const Outcome r = run(kAlone + "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                        " WORLD_SIZE=2 RANK=1 DISTLAB_CONNECT_TIMEOUT_MS=1500 " + LESSON_01 + " --backend gloo");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1: cannot reach the master at 127.0.0.1:" + port + " within 1500 ms"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "socket.cpp")) << r.output;
  EXPECT_FALSE(contains(r.output, "InitGoogleLogging")) << r.output;
}

// The three ranks started by hand, not by distlab-run: a launcher stops the
// survivors once rank 1 is gone, and its SIGTERM may come before they see
// the closed connection. Rank 0's status is the command's.
TEST(FirstRun, ADeadPeerIsNotCalledAMismatch) {
  const std::string hint = "(every rank must call the same collective with the same element count and dtype)";
  const std::string rank = kAlone + "WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                           std::to_string(free_port()) + " RANK=$r LOCAL_RANK=$r " + LESSON_14 +
                           " --backend gloo --bug dead --culprit 1 --batch 24 --flight-dir " +
                           fresh_dir("first_run_dead");
  const Outcome dead = run("sh -c 'for r in 1 2; do " + rank + " & done; r=0; " + rank + "; s=$?; wait; exit $s'");
  EXPECT_NE(dead.status, 0) << dead.output;
  EXPECT_TRUE(contains(dead.output, "closed the connection (did it exit or crash?)")) << dead.output;
  EXPECT_FALSE(contains(dead.output, hint)) << dead.output;

  // A mismatch still gets it.
  const Outcome shape = run(std::string(LESSON_14) + " --backend threads --ranks 3 --bug shape --batch 24 --flight-dir " +
                            fresh_dir("first_run_shape"));
  EXPECT_NE(shape.status, 0) << shape.output;
  EXPECT_TRUE(contains(shape.output, "the send carries")) << shape.output;
  EXPECT_TRUE(contains(shape.output, hint)) << shape.output;
}

// The README's commands as given, in a folder of their own: the launcher's
// exit records land beside the lesson's flight files (its default
// $TMPDIR/flight_14, chosen inside the lesson), and nothing lands in the
// working directory (often a checkout).
TEST(FirstRun, DistlabRunWritesExitRecordsBesideLesson14sFlightFiles) {
  const std::string cwd = fresh_dir("first_run_records"), tmp = fresh_dir("first_run_records_tmp");
  const Outcome job = run("sh -c 'cd " + cwd + " && TMPDIR=" + tmp + " " + DISTLAB_RUN +
                          " --nproc-per-node 3 --master-port 0 -- " + LESSON_14 +
                          " --backend gloo --bug dead --culprit 1 --batch 24'");
  EXPECT_TRUE(contains(job.output, "was killed by SIGKILL")) << job.output;
  EXPECT_TRUE(contains(job.output, "Run it yourself: build/launcher/distlab-trace why " + tmp + "/flight_14"))
      << job.output;
  EXPECT_TRUE(std::filesystem::is_empty(cwd)) << "the lesson wrote into its working directory\n" << job.output;
  EXPECT_TRUE(std::filesystem::exists(tmp + "/flight_14/flight.rank1.exit.json")) << job.output;
  const Outcome why = run(std::string(DISTLAB_TRACE) + " why " + tmp + "/flight_14");
  EXPECT_TRUE(contains(why.output, "rank 1 left the job (killed by SIGKILL, exit 137)")) << why.output;
}

std::string digest_of(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex("\\[RANK 0\\] final parameters digest (0x[0-9a-f]{8})")) ? m[1].str()
                                                                                                        : "none";
}

TEST(FirstRun, ASecondRunOfLesson09SaysItResumesAndFreshStartsOver) {
  const std::string dir = fresh_dir("first_run_09") + "/checkpoints";
  const std::string lesson = std::string(LESSON_09) + " --backend threads --ranks 2 --steps 4 --save-every 2 "
                             "--checkpoint-dir " + dir;
  const Outcome first = run(lesson);
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_TRUE(contains(first.output, "no checkpoint in " + dir)) << first.output;

  const Outcome second = run(lesson);
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_TRUE(contains(second.output, "[RANK 0] resuming from " + dir + "/step_000000004 (step 4 of 4), left by an "
                                      "earlier run: --fresh (or deleting " + dir + ") starts from step 0"))
      << second.output;

  const Outcome fresh = run(lesson + " --fresh");
  ASSERT_EQ(fresh.status, 0) << fresh.output;
  EXPECT_TRUE(contains(fresh.output, "no checkpoint in " + dir)) << fresh.output;
  EXPECT_FALSE(contains(fresh.output, "resuming from")) << fresh.output;
  EXPECT_EQ(digest_of(fresh.output), digest_of(first.output)) << fresh.output;
  EXPECT_TRUE(contains(fresh.output, "after 4 steps")) << fresh.output;
}

TEST(FirstRun, CountsAreInWordsAndHelpShowsNoFlagDefaults) {
  const Outcome one = run(std::string(LESSON_09) + " --backend threads --ranks 1 --steps 1 --checkpoint-dir " +
                          fresh_dir("first_run_one") + "/c");
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_TRUE(contains(one.output, "final parameters digest")) << one.output;
  EXPECT_TRUE(contains(one.output, " after 1 step\n")) << one.output;

  const Outcome help = run(std::string(LESSON_05) + " --help");
  EXPECT_EQ(help.status, 0) << help.output;
  EXPECT_TRUE(contains(help.output, "--no-steps")) << help.output;
  EXPECT_FALSE(contains(help.output, "{false}")) << help.output;
}

}  // namespace
