// The capstone (lesson 11, 2 stages x 2 replicas, 4 gloo processes) killed
// for real: world rank 3 SIGKILLs itself after step 5, the launcher
// restarts all four, the trainer resumes on its own (no --resume: the
// launcher's restart count says it is a restart) from the newest complete
// checkpoint, and the final digest equals that of a run never interrupted.
// Under distlab-run and under PyTorch's torchrun.
#include <gtest/gtest.h>

#include "run_command.hpp"

namespace distlab::train {
namespace {

using testing::contains;
using testing::digests;
using testing::emptied;
using testing::fresh_dir;
using testing::Outcome;
using testing::run_on_free_port;

const std::string kLesson = LESSON_11;
const std::string kRun = DISTLAB_RUN;
// 2 epochs of 4 batches = 8 steps; checkpoints at steps 2, 4 (epoch end), 6, 8.
const std::string kTraining =
    " --backend gloo --preset tiny --epochs 2 --batches-per-epoch 4 --eval-batches 4 --timeout-ms 30000"
    " --checkpoint-every 2";

const std::string& uninterrupted_digest() {
  static const std::string digest = [] {
    const std::string dir = fresh_dir("capstone_uninterrupted");
    const Outcome r = run_on_free_port(
        [&](const std::string& port) {
          return kRun + " --nproc-per-node 4 --master-port " + port + " -- " + kLesson + kTraining +
                 " --checkpoint-dir " + emptied(dir);
        },
        120);
    EXPECT_EQ(r.status, 0) << r.output;
    const auto found = digests(r.output);
    EXPECT_EQ(found.size(), 1u) << r.output;  // world rank 0 prints it
    return found.empty() ? std::string("none") : found[0];
  }();
  return digest;
}

void expect_resumed_bit_for_bit(const Outcome& r, const std::string& dir) {
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[RANK 3]: failing on purpose after step 5")) << r.output;
  // Replica 0 of each stage says where its stage resumed.
  for (int stage = 0; stage < 2; ++stage)
    EXPECT_TRUE(contains(r.output, "[RANK " + std::to_string(stage) + "]: resumed from " + dir +
                                       "/step_000000004: stage " + std::to_string(stage) + ", epoch 2, batch 0, step 4"))
        << r.output;
  const auto found = digests(r.output);
  ASSERT_EQ(found.size(), 1u) << r.output;  // only the resumed attempt finishes
  EXPECT_EQ(found[0], uninterrupted_digest()) << r.output;
}

TEST(CapstoneFailover, KilledRankUnderDistlabRunResumesOnItsOwn) {
  const std::string dir = fresh_dir("capstone_distlab_run");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return kRun + " --nproc-per-node 4 --max-restarts 1 --grace-ms 2000 --master-port " + port + " -- " + kLesson +
               kTraining + " --checkpoint-dir " + emptied(dir) + " --kill-rank 3 --kill-at-step 5";
      },
      180);
  EXPECT_TRUE(contains(r.output, "was killed by SIGKILL")) << r.output;
  EXPECT_TRUE(contains(r.output, "restarting all workers (restart 1 of 1)")) << r.output;
  expect_resumed_bit_for_bit(r, dir);
}

TEST(CapstoneFailover, KilledRankUnderTorchrunResumesOnItsOwn) {
  const std::string dir = fresh_dir("capstone_torchrun");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return "/usr/bin/torchrun --nproc_per_node 4 --max_restarts 1 --monitor_interval 1 --redirects 1 --tee 1 "
               "--log_dir " + emptied(dir) + "/logs --master_port " + port + " --no_python " + kLesson + kTraining +
               " --checkpoint-dir " + dir + " --kill-rank 3 --kill-at-step 5";
      },
      180);
  expect_resumed_bit_for_bit(r, dir);
}

}  // namespace
}  // namespace distlab::train
