// Lesson 09 as a user runs it: a rank killed (SIGKILL) mid-training, the
// launcher restarts all, training resumes from the newest complete
// checkpoint, and the final parameters' digest equals the one of a run that
// was never interrupted. Under distlab-run (one node, and two launchers as
// two nodes) and under PyTorch's torchrun. Then the same for the capstone
// (lesson 11, 2 stages x 2 replicas, 4 gloo processes), which resumes on
// its own after the launcher's restart. Every run has a hard deadline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "run_command.hpp"
#include "support/small_corpus.hpp"

namespace distlab::train {
namespace {

using testing::contains;
using testing::digests;
using testing::emptied;
using testing::fresh_dir;
using testing::Outcome;
using testing::run_command;
using testing::run_on_free_port;

const std::string kLesson = LESSON_09;
const std::string kRun = DISTLAB_RUN;
// 40 steps of 2 ranks, a checkpoint every 10: the kill at step 25 resumes at 20.
const std::string kTraining = " --backend gloo --steps 40 --save-every 10 --timeout-ms 20000";

// `nproc` workers under distlab-run, all restarted once when one fails;
// the program and its flags follow.
std::string distlab_run_restarting(int nproc, const std::string& port) {
  return kRun + " --nproc-per-node " + std::to_string(nproc) + " --max-restarts 1 --grace-ms 2000 --master-port " +
         port + " -- ";
}

// The same under PyTorch's torchrun (Debian's 1.13 needs --redirects 1
// --tee 1 to show the workers' output), its logs in `log_dir`.
std::string torchrun_restarting(int nproc, const std::string& log_dir, const std::string& port) {
  return "/usr/bin/torchrun --nproc_per_node " + std::to_string(nproc) +
         " --max_restarts 1 --monitor_interval 1 --redirects 1 --tee 1 --log_dir " + log_dir + " --master_port " +
         port + " --no_python ";
}

// The uninterrupted run: 2 ranks under distlab-run, no kill.
const std::string& uninterrupted_digest() {
  static const std::string digest =
      testing::digest_of_run("uninterrupted", 2, 60, [](const std::string& port, const std::string& dir) {
        return kRun + " --nproc-per-node 2 --master-port " + port + " -- " + kLesson + kTraining +
               " --checkpoint-dir " + dir;
      });
  return digest;
}

void expect_resumed_bit_for_bit(const Outcome& r, const std::string& dir) {
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "failing on purpose at step 25")) << r.output;
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(contains(r.output, "[RANK " + std::to_string(rank) + "] resumed from " + dir + "/step_000000020"))
        << r.output;
  const auto found = digests(r.output);
  ASSERT_EQ(found.size(), 2u) << r.output;  // only the resumed attempt finishes
  for (const auto& d : found) EXPECT_EQ(d, uninterrupted_digest()) << r.output;
  EXPECT_TRUE(contains(r.output, "equal to the uninterrupted run's digest")) << r.output;
}

TEST(Failover, UninterruptedRunsRepeatBitForBit) {
  // Two fresh runs give the same digest: the reference is deterministic.
  const std::string dir = fresh_dir("again");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return kRun + " --nproc-per-node 2 --master-port " + port + " -- " + kLesson + kTraining +
               " --checkpoint-dir " + emptied(dir) + " --expect-digest " + uninterrupted_digest();
      },
      60);
  EXPECT_EQ(r.status, 0) << r.output;
  // And the threads backend, same ranks and data, gives the same numbers:
  // gloo's sum of two gradients is the same addition.
  const Outcome t = run_command(kLesson + " --backend threads --ranks 2 --steps 40 --save-every 10 --checkpoint-dir " +
                                    fresh_dir("threads"),
                                60);
  EXPECT_EQ(t.status, 0) << t.output;
  const auto found = digests(t.output);
  ASSERT_EQ(found.size(), 2u) << t.output;
  EXPECT_EQ(found[0], uninterrupted_digest()) << t.output;
}

TEST(Failover, KillAndResumeUnderDistlabRun) {
  const std::string dir = fresh_dir("distlab_run"), here = fresh_dir("distlab_run_cwd");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return "cd " + emptied(here) + " && " + distlab_run_restarting(2, port) + kLesson + kTraining +
               " --checkpoint-dir " + emptied(dir) + " --kill-rank 1 --kill-at-step 25 --expect-digest " +
               uninterrupted_digest();
      },
      90);
  EXPECT_TRUE(contains(r.output, "rank 1 (pid")) << r.output;
  EXPECT_TRUE(contains(r.output, "was killed by SIGKILL")) << r.output;
  EXPECT_TRUE(contains(r.output, "restarting all workers (restart 1 of 1)")) << r.output;
  expect_resumed_bit_for_bit(r, dir);
  // The flight records of the failed attempt sit beside the checkpoints
  // (the launcher's record of the SIGKILL among them), none in the working
  // directory.
  EXPECT_TRUE(std::filesystem::exists(dir + "/flight/flight.rank1.exit.json")) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(here)) << r.output;
}

// RANK vs LOCAL_RANK: two launchers of one rank each act as two nodes. The
// killed rank's launcher restarts it; the other rank loses its peer, fails,
// and is restarted by its own launcher; both meet again at restart 1.
TEST(Failover, KillAndResumeAcrossTwoLaunchers) {
  const std::string dir = fresh_dir("two_nodes");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        const std::string common =
            kRun + " --nnodes 2 --nproc-per-node 1 --max-restarts 1 --grace-ms 2000 --master-port " + port;
        const std::string program = " -- " + kLesson + kTraining + " --checkpoint-dir " + emptied(dir) +
                                    " --kill-rank 1 --kill-at-step 25 --expect-digest " + uninterrupted_digest();
        return "(" + common + " --node-rank 1" + program + " & " + common + " --node-rank 0" + program + "; wait)";
      },
      120);
  EXPECT_TRUE(contains(r.output, "[RANK 0] LOCAL_RANK 0 of 1 on node 0, WORLD_SIZE 2")) << r.output;
  EXPECT_TRUE(contains(r.output, "[RANK 1] LOCAL_RANK 0 of 1 on node 1, WORLD_SIZE 2")) << r.output;
  expect_resumed_bit_for_bit(r, dir);
}

TEST(Failover, KillAndResumeUnderTorchrun) {
  const std::string dir = fresh_dir("torchrun");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return torchrun_restarting(2, emptied(dir) + "/logs", port) + kLesson + kTraining + " --checkpoint-dir " +
               dir + " --kill-rank 1 --kill-at-step 25 --expect-digest " + uninterrupted_digest();
      },
      120);
  // torchrun's restart count reaches the ranks, which now use the keys of attempt 1.
  EXPECT_TRUE(contains(r.output, "restart 1, pid")) << r.output;
  expect_resumed_bit_for_bit(r, dir);
}

// A bit flipped in the newest checkpoint: the resumed run says so in one
// line, goes back one checkpoint, and still ends bit for bit.
// The lines "step  30  epochs done 1  loss 0.456372  saved ..." by step.
std::map<std::string, std::string> saved_losses(const std::string& output) {
  static const std::regex line(R"(step +(\d+) +epochs done \d+ +loss ([\d.]+) +saved)");
  std::map<std::string, std::string> losses;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    losses[(*it)[1]] = (*it)[2];
  return losses;
}

// Half the ranks lost for good: 4 processes, rank 3 killed at step 25, no
// restart; the job goes on with 2 processes from step 20's checkpoint to
// step 40, then the others come back and 4 go on to 60. Every loss saved
// after the loss equals the uninterrupted 4-process run's to the 6 printed
// decimals (the gradient is the whole batch's mean whatever the world size).
TEST(Failover, HalfTheRanksGoOnThenComeBack) {
  const std::string dir = fresh_dir("lesson09_elastic"), whole = fresh_dir("lesson09_elastic_whole");
  auto run = [&](int nproc, int steps, const std::string& folder, const std::string& extra) {
    return run_on_free_port(
        [&](const std::string& port) {
          return kRun + " --nproc-per-node " + std::to_string(nproc) + " --master-port " + port + " -- " + kLesson +
                 " --backend gloo --steps " + std::to_string(steps) + " --save-every 10 --timeout-ms 20000" +
                 " --checkpoint-dir " + folder + extra;
        },
        90);
  };
  const Outcome uninterrupted = run(4, 60, emptied(whole), "");
  ASSERT_EQ(uninterrupted.status, 0) << uninterrupted.output;
  const Outcome lost = run(4, 60, emptied(dir), " --kill-rank 3 --kill-at-step 25");
  EXPECT_NE(lost.status, 0) << lost.output;
  const Outcome half = run(2, 40, dir, "");
  ASSERT_EQ(half.status, 0) << half.output;
  EXPECT_TRUE(contains(half.output, "resumed from " + dir + "/step_000000020")) << half.output;
  EXPECT_TRUE(contains(half.output, "the checkpoint was written by 4 ranks; 2 go on, 16 of the 32 rows each (was 8)"))
      << half.output;
  const Outcome back = run(4, 60, dir, "");
  ASSERT_EQ(back.status, 0) << back.output;
  EXPECT_TRUE(contains(back.output, "resumed from " + dir + "/step_000000040")) << back.output;
  EXPECT_TRUE(contains(back.output, "the checkpoint was written by 2 ranks; 4 go on, 8 of the 32 rows each (was 16)"))
      << back.output;
  const auto reference = saved_losses(uninterrupted.output);
  auto resumed = saved_losses(half.output);
  for (const auto& [step, loss] : saved_losses(back.output)) resumed[step] = loss;
  for (const std::string step : {"30", "40", "50", "60"}) {
    ASSERT_TRUE(resumed.count(step) && reference.count(step)) << step << half.output << back.output;
    EXPECT_EQ(resumed.at(step), reference.at(step)) << "step " << step;
  }
}

TEST(Failover, CorruptNewestCheckpointIsSkippedOnResume) {
  const std::string dir = fresh_dir("corrupt");
  Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return kRun + " --nproc-per-node 2 --master-port " + port + " -- " + kLesson +
               " --backend gloo --steps 30 --save-every 10 --timeout-ms 20000 --checkpoint-dir " + emptied(dir);
      },
      60);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string model = dir + "/step_000000030/stage0.model.pt";
  {
    std::fstream file(model, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(200);
    char c = 0;
    file.read(&c, 1);
    c ^= 0x10;
    file.seekp(200);
    file.write(&c, 1);
  }
  r = run_on_free_port(
      [&](const std::string& port) {
        return kRun + " --nproc-per-node 2 --master-port " + port + " -- " + kLesson + kTraining +
               " --checkpoint-dir " + dir + " --expect-digest " + uninterrupted_digest();
      },
      60);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[RANK 0] checkpoint: skipping " + dir + "/step_000000030: " + model + " is corrupt"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "[RANK 1] resumed from " + dir + "/step_000000020")) << r.output;
  EXPECT_TRUE(contains(r.output, "equal to the uninterrupted run's digest")) << r.output;
}

// ------------------------------------------------------------- the capstone
// World rank 3 SIGKILLs itself after step 5; the launcher restarts all four;
// the trainer resumes on its own (no --resume: the launcher's restart count
// says it is a restart) from the newest complete checkpoint.

// 2 epochs of 4 batches = 8 steps; checkpoints at steps 2, 4 (epoch end), 6,
// 8; on the tests' small corpus (tests/support/small_corpus.hpp).
std::string capstone_training() {
  return std::string(LESSON_11) + " --data " + test_support::small_corpus_folder() +
         " --backend gloo --preset tiny --epochs 2 --batches-per-epoch 4 --eval-batches 4 --timeout-ms 30000"
         " --checkpoint-every 2";
}

const std::string& capstone_uninterrupted_digest() {
  static const std::string digest = testing::digest_of_run(
      "capstone_uninterrupted", 1, 120, [](const std::string& port, const std::string& dir) {
        return kRun + " --nproc-per-node 4 --master-port " + port + " -- " + capstone_training() +
               " --checkpoint-dir " + dir;
      });  // world rank 0 prints it
  return digest;
}

void expect_capstone_resumed_bit_for_bit(const Outcome& r, const std::string& dir) {
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[RANK 3]: failing on purpose after step 5")) << r.output;
  // Replica 0 of each stage says where its stage resumed.
  for (int stage = 0; stage < 2; ++stage)
    EXPECT_TRUE(contains(r.output, "[RANK " + std::to_string(stage) + "]: resumed from " + dir +
                                       "/step_000000004: stage " + std::to_string(stage) + ", epoch 2, batch 0, step 4"))
        << r.output;
  const auto found = digests(r.output);
  ASSERT_EQ(found.size(), 1u) << r.output;  // only the resumed attempt finishes
  EXPECT_EQ(found[0], capstone_uninterrupted_digest()) << r.output;
}

TEST(CapstoneFailover, KilledRankUnderDistlabRunResumesOnItsOwn) {
  const std::string dir = fresh_dir("capstone_distlab_run");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return distlab_run_restarting(4, port) + capstone_training() + " --checkpoint-dir " + emptied(dir) +
               " --kill-rank 3 --kill-at-step 5";
      },
      180);
  EXPECT_TRUE(contains(r.output, "was killed by SIGKILL")) << r.output;
  EXPECT_TRUE(contains(r.output, "restarting all workers (restart 1 of 1)")) << r.output;
  expect_capstone_resumed_bit_for_bit(r, dir);
}

TEST(CapstoneFailover, KilledRankUnderTorchrunResumesOnItsOwn) {
  const std::string dir = fresh_dir("capstone_torchrun");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return torchrun_restarting(4, emptied(dir) + "/logs", port) + capstone_training() +
               " --checkpoint-dir " + dir + " --kill-rank 3 --kill-at-step 5";
      },
      180);
  expect_capstone_resumed_bit_for_bit(r, dir);
}

// The last line of the test loss ("| End of training | test loss  7.22 | ...").
std::string test_line(const std::string& output) {
  const size_t at = output.find("| End of training |");
  return at == std::string::npos ? std::string("(none)") : output.substr(at, output.find('\n', at) - at);
}

// The capstone's uninterrupted 2 x 2 run with dropout 0: its test-loss line.
const std::string& capstone_uninterrupted_test_line() {
  static const std::string line = [] {
    const Outcome r = run_on_free_port(
        [&](const std::string& port) {
          return kRun + " --nproc-per-node 4 --master-port " + port + " -- " + capstone_training() +
                 " --dropout 0 --checkpoint-dir " + emptied(fresh_dir("capstone_elastic_whole"));
        },
        120);
    EXPECT_EQ(r.status, 0) << r.output;
    return test_line(r.output);
  }();
  return line;
}

// Two torchrun agents of two workers each form one job through the c10d
// rendezvous (--nnodes 1:2) in `dir`, both running `program`; when
// `dir`/`appears` exists (a checkpoint folder) agent b and its workers are
// SIGKILLed: a node lost for good. Agent a's workers fail, it restarts them
// (--max_restarts 1) on the world that is left; the command ends with a's log.
std::string two_agents_one_lost(const std::string& dir, const std::string& port, const std::string& program,
                                 const std::string& appears) {
  const std::string agent = "/usr/bin/torchrun --nnodes 1:2 --nproc_per_node 2 --rdzv_backend c10d "
                            "--rdzv_endpoint 127.0.0.1:" + port + " --rdzv_id elastic" + port +
                            " --rdzv_conf last_call_timeout=10"  // the survivor waits 10 s for b, not 30
                            " --max_restarts 1 --monitor_interval 1 --redirects 1 --tee 1 --no_python ";
  return "cd " + dir + " && (" + agent + "--log_dir " + dir + "/logs_a " + program +
         " > a.log 2>&1 & echo $! > a.pid) && sleep 1 && (" + agent + "--log_dir " + dir + "/logs_b " + program +
         " > b.log 2>&1 & echo $! > b.pid) && for i in $(seq 1 900); do [ -d " + appears +
         " ] && break; sleep 0.1; done; B=$(cat b.pid); kill -9 $(pgrep -P $B) $B; "
         "echo killed agent b and its workers; while kill -0 $(cat a.pid) 2>/dev/null; do sleep 0.5; done; cat a.log";
}

// The capstone on two agents, one lost after the checkpoint of step 4: the
// survivor's workers restart on a world of 2, fit the layout to it (2
// stages x 1 replica: the stages kept) and resume from the newest
// checkpoint of the 2 x 2 job; with dropout 0 they end with the
// uninterrupted 2 x 2 run's test loss, the 8 steps run once each.
TEST(CapstoneElastic, TorchrunAgentLostGoesOnAsTwoByOne) {
  const std::string dir = fresh_dir("capstone_elastic");
  const std::string program =
      capstone_training() + " --dropout 0 --elastic --checkpoint-dir " + dir + "/ckpt";
  const Outcome r = run_on_free_port(
      [&](const std::string& port) { return two_agents_one_lost(emptied(dir), port, program, "ckpt/step_000000004"); },
      240);
  EXPECT_TRUE(contains(r.output, "killed agent b and its workers")) << r.output;
  EXPECT_TRUE(contains(r.output, "elastic: asked 2 stages x 2 replicas, 2 rank(s) here: 2 stages x 1 replica"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "the 2 stages kept, the replicas follow the world")) << r.output;
  EXPECT_TRUE(contains(r.output, "Lesson 11: the capstone, 2 stages x 1 replica on 2 gloo ranks")) << r.output;
  EXPECT_TRUE(contains(r.output, "(written by rank 0 of 2 stages x 2 replicas)")) << r.output;
  EXPECT_TRUE(contains(r.output, "(2 stages x 1 replica, 8 steps)")) << r.output;
  EXPECT_EQ(test_line(r.output), capstone_uninterrupted_test_line()) << r.output;
  EXPECT_NE(test_line(r.output), "(none)");
}

// The same under distlab-run: 4 processes, world rank 3 killed after step 5
// and no restart (the job fails); the user starts 3 processes with
// --elastic --resume. 3 ranks cannot keep 2 stages, so the layout is 1 x 3
// and the 2-stage checkpoint of step 4 is re-cut into one stage; the 4
// remaining steps run there and the test loss is the uninterrupted 2 x 2 run's.
TEST(CapstoneElastic, DistlabRunWithFewerProcessesReCutsTheStages) {
  const std::string dir = fresh_dir("capstone_elastic_distlab_run");
  auto run = [&](int nproc, const std::string& extra) {
    return run_on_free_port(
        [&](const std::string& port) {
          return kRun + " --nproc-per-node " + std::to_string(nproc) + " --master-port " + port + " -- " +
                 capstone_training() + " --dropout 0 --elastic --checkpoint-dir " + dir + extra;
        },
        180);
  };
  const Outcome lost = run(4, " --kill-rank 3 --kill-at-step 5");
  EXPECT_NE(lost.status, 0) << lost.output;
  EXPECT_TRUE(contains(lost.output, "[RANK 3]: failing on purpose after step 5")) << lost.output;
  const Outcome rest = run(3, " --resume");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_TRUE(contains(rest.output, "Lesson 11: the capstone, 1 stage x 3 replicas on 3 gloo ranks")) << rest.output;
  EXPECT_TRUE(contains(rest.output, "3 ranks do not split into 2 stages; 1 stage does: the model is re-cut"))
      << rest.output;
  EXPECT_TRUE(contains(rest.output, "re-cutting the 2-stage checkpoint of step 4 into 1 stage(s)")) << rest.output;
  EXPECT_TRUE(contains(rest.output, "(written by rank 0 of 2 stages x 2 replicas)")) << rest.output;
  EXPECT_TRUE(contains(rest.output, "(1 stage x 3 replicas, 8 steps)")) << rest.output;
  EXPECT_EQ(test_line(rest.output), capstone_uninterrupted_test_line()) << rest.output;
}

// Lesson 09's half-the-ranks story on the real elastic engine: two torchrun
// agents of 2 workers, agent b lost for good after the checkpoint of step
// 20; agent a's 2 workers restart and go on from step 20 with 16 rows each
// (was 8). Every loss saved after that is the uninterrupted 4-process run's.
TEST(Failover, TorchrunAgentLostLessonNineGoesOnWithTwo) {
  const std::string dir = fresh_dir("lesson09_torchrun_elastic"), whole = fresh_dir("lesson09_torchrun_whole");
  const std::string flags = " --backend gloo --steps 40 --save-every 10 --timeout-ms 20000";
  const Outcome uninterrupted = run_on_free_port(
      [&](const std::string& port) {
        return kRun + " --nproc-per-node 4 --master-port " + port + " -- " + kLesson + flags + " --checkpoint-dir " +
               emptied(whole);
      },
      90);
  ASSERT_EQ(uninterrupted.status, 0) << uninterrupted.output;
  const std::string program = kLesson + flags + " --pause-ms 100 --checkpoint-dir " + dir + "/ckpt";
  const Outcome r = run_on_free_port(
      [&](const std::string& port) { return two_agents_one_lost(emptied(dir), port, program, "ckpt/step_000000020"); },
      240);
  EXPECT_TRUE(contains(r.output, "killed agent b and its workers")) << r.output;
  EXPECT_TRUE(contains(r.output, "the checkpoint was written by 4 ranks; 2 go on, 16 of the 32 rows each (was 8)"))
      << r.output;
  const auto reference = saved_losses(uninterrupted.output);
  const auto resumed = saved_losses(r.output);
  for (const std::string step : {"30", "40"}) {
    ASSERT_TRUE(resumed.count(step) && reference.count(step)) << step << r.output;
    EXPECT_EQ(resumed.at(step), reference.at(step)) << "step " << step;
  }
}

}  // namespace
}  // namespace distlab::train
