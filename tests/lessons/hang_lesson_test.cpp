// Lesson 14 run as a user runs it: each bug on thread ranks, and skip and
// dead on gloo processes under distlab-run, with culprits, steps and world
// sizes chosen here. The diagnosis the lesson prints must name exactly the
// culprit, the operation, the sequence number counted here from the
// lesson's structure (the broadcast, then a gradient all-reduce and a loss
// reduce per step), and the cause; on thread ranks it must be what the
// built distlab-trace why prints for the same files. --bug none must exit 0
// with the losses of one process trained here on the whole batch, with
// LibTorch's own SGD. Every run must end well within its timeout.
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "14_debugging_a_hang/tiny_job.hpp"
#include "compat/torch.hpp"
#include "flight/why.hpp"
#include "run_program.hpp"
#include "support/required_tool.hpp"

namespace {

using distlab::lessons::testing::lines_of;
namespace flight = distlab::flight;
namespace lesson14 = distlab::lesson14;

struct LessonRun {
  distlab::lessons::testing::Outcome outcome;
  double seconds = 0;
  std::string dir;  // the flight files
};

// The lesson on `ranks` thread ranks, or as `ranks` gloo processes under
// distlab-run, with `flags`; its flight files into a fresh directory.
LessonRun run_lesson(const std::string& name, int ranks, bool gloo, const std::string& flags) {
  LessonRun r;
  r.dir = testing::TempDir() + "distlab_hang_" + name;
  std::filesystem::remove_all(r.dir);
  const std::string lesson = std::string(LESSON_14) + " --flight-dir " + r.dir + " " + flags;
  const std::string command =
      gloo ? std::string(DISTLAB_RUN) + " --nproc-per-node " + std::to_string(ranks) + " --master-port 0 -- " +
                 lesson + " --backend gloo"
           : lesson + " --backend threads --ranks " + std::to_string(ranks);
  const auto start = std::chrono::steady_clock::now();
  r.outcome = distlab::lessons::testing::run(command, "< /dev/null");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// The lines that start with `prefix`, without it.
std::string lines_with(const std::string& output, const std::string& prefix) {
  std::string mine;
  for (const auto& line : lines_of(output))
    if (line.rfind(prefix, 0) == 0) mine += line.substr(prefix.size()) + "\n";
  return mine;
}

// What `rank` printed (distlab-run prefixes each line with "[rank R] ").
std::string lines_of_rank(const std::string& output, int rank) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string mine;
  for (const auto& line : lines_of(output))
    if (line.rfind(prefix, 0) == 0) mine += line.substr(prefix.size()) + "\n";
  return mine;
}

// The run as one rank's lines show it (processes: other ranks' lines may
// come between the reporting rank's).
LessonRun as_printed_by(LessonRun r, int rank) {
  r.outcome.output = lines_of_rank(r.outcome.output, rank);
  return r;
}

// The diagnosis as the lesson printed it: the lines after its heading, up to the blank line.
std::string printed_diagnosis(const std::string& output) {
  const std::string heading = "  what distlab-trace why says about these files:\n";
  const size_t from = output.find(heading);
  if (from == std::string::npos) return "";
  const size_t begin = from + heading.size();
  return output.substr(begin, output.find("\n\n", begin) + 1 - begin);
}

std::string distlab_trace_why(const std::string& dir) {
  return distlab::lessons::testing::run(std::string(DISTLAB_TRACE) + " why " + dir).output;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every rank but `culprit`, as the diagnosis writes them: "ranks 0-2", "ranks 0, 2, 3".
std::string others(int ranks, int culprit) {
  std::vector<int> rest;
  for (int r = 0; r < ranks; ++r)
    if (r != culprit) rest.push_back(r);
  return flight::ranks_text(rest);
}

// The fault at step k hits the collective after 1 + 2 (k - 1) others: the
// broadcast of the initial weights, then each earlier step's gradient
// all-reduce and loss reduce.
uint64_t fault_seq(int k) { return 1 + 2 * static_cast<uint64_t>(k - 1); }

// The files' diagnosis, read here: its first finding names `culprit`, `seq`,
// all_reduce and `cause`; and the lesson printed that finding too.
void expect_found(const LessonRun& r, const std::string& printed, const std::string& cause, int culprit, int k) {
  const std::string& out = r.outcome.output;
  EXPECT_NE(r.outcome.status, 0) << "a bug was injected: the exit status must say so\n" << out;
  EXPECT_LT(r.seconds, 30) << "the job must stop within its timeout (3 s), not hang\n" << out;
  const flight::Diagnosis d = flight::diagnose_files({r.dir});
  ASSERT_FALSE(d.findings.empty()) << out;
  const flight::Finding& first = d.findings.front();
  EXPECT_EQ(first.cause, cause) << flight::to_text(d) << out;
  EXPECT_EQ(first.culprits, std::vector<int>{culprit}) << flight::to_text(d) << out;
  EXPECT_EQ(first.seq, fault_seq(k)) << flight::to_text(d) << out;
  EXPECT_EQ(first.op, "all_reduce") << flight::to_text(d) << out;
  EXPECT_TRUE(contains(printed, first.text.substr(0, first.text.find('\n')))) << printed << "\n" << out;
  EXPECT_TRUE(contains(out, "the diagnosis names that rank, that number and that cause")) << out;
  EXPECT_TRUE(contains(out, "Run it yourself: build/launcher/distlab-trace why " + r.dir)) << out;
}

// Thread ranks: the files do not change once the job is over, so the lesson
// printed exactly what distlab-trace why prints.
std::string diagnosis_on_threads(const LessonRun& r) {
  const std::string printed = printed_diagnosis(r.outcome.output);
  EXPECT_EQ(printed, distlab_trace_why(r.dir)) << r.outcome.output;
  return printed;
}

TEST(Lesson14, SkipOnThreadRanksNamesTheRankThatNeverEnteredTheAllReduce) {
  const int ranks = 4, culprit = 1, k = 2;
  const LessonRun r = run_lesson("skip", ranks, false, "--bug skip --culprit 1 --at-step 2 --batch 24");
  const std::string printed = diagnosis_on_threads(r);
  expect_found(r, printed, "skip", culprit, k);
  const std::string n = std::to_string(fault_seq(k));
  EXPECT_TRUE(contains(printed, others(ranks, culprit) + " are in all_reduce #" + n +
                                    " (lesson 14 step 2 gradients) of group world"))
      << printed;
  EXPECT_TRUE(contains(printed, "rank 1 never entered it: its last operation in world was reduce #" +
                                    std::to_string(fault_seq(k) - 1) + " (lesson 14 step 1 loss), completed at"))
      << printed;
  EXPECT_TRUE(contains(printed, "then it returned from its work")) << printed;
}

TEST(Lesson14, OrderOnThreadRanksIsAMismatchAtTheNumberOfTheFirstSwappedCall) {
  const int ranks = 3, culprit = 0, k = 4;
  const LessonRun r = run_lesson("order", ranks, false, "--bug order --culprit 0 --at-step 4 --steps 4 --batch 24");
  const std::string printed = diagnosis_on_threads(r);
  expect_found(r, printed, "order", culprit, k);
  EXPECT_TRUE(contains(printed, "collective mismatch at #" + std::to_string(fault_seq(k)) + " of group world: " +
                                    others(ranks, culprit) +
                                    " all_reduce float32 [161] (ring), rank 0 reduce float32 [1] root 0 (tree)"))
      << printed;
  EXPECT_TRUE(contains(printed, "rank 0 called reduce (lesson 14 step 4 loss) where the others call all_reduce "
                                "(lesson 14 step 4 gradients)"))
      << printed;
}

TEST(Lesson14, ShapeOnThreadRanksNamesBothShapes) {
  const int ranks = 4, culprit = 2, k = 1;
  const LessonRun r = run_lesson("shape", ranks, false, "--bug shape --culprit 2 --at-step 1");
  const std::string printed = diagnosis_on_threads(r);
  expect_found(r, printed, "shape", culprit, k);
  EXPECT_TRUE(contains(printed, "collective mismatch at #1 of group world: " + others(ranks, culprit) +
                                    " all_reduce float32 [161] (ring), rank 2 all_reduce float32 [160] (ring)"))
      << printed;
  EXPECT_TRUE(contains(printed, "rank 2 passed another dtype or shape to all_reduce #1 (lesson 14 step 1 gradients)"))
      << printed;
}

TEST(Lesson14, DeadOnThreadRanksIsTheCauseOfEveryOtherRanksWait) {
  const int ranks = 3, culprit = 2, k = 3;
  const LessonRun r = run_lesson("dead", ranks, false, "--bug dead --culprit 2 --at-step 3 --batch 24");
  const std::string printed = diagnosis_on_threads(r);
  expect_found(r, printed, "dead", culprit, k);
  const std::string n = std::to_string(fault_seq(k));
  EXPECT_TRUE(contains(printed, "rank 2 left the job (failed: rank 2 died on purpose at step 3 (--bug dead)) after "
                                "reduce #" + std::to_string(fault_seq(k) - 1) + " of group world"))
      << printed;
  for (int w : {0, 1})
    EXPECT_TRUE(contains(printed, "rank " + std::to_string(w) + " waits for it in all_reduce #" + n +
                                      " of group world (lesson 14 step 3 gradients)"))
        << printed;
}

// Each rank says what it saw: a timeout naming the operation and the peer,
// the peer often innocent (in a ring, rank 2 waits for rank 1, which waits
// for the culprit).
TEST(Lesson14, EachRankSaysWhatItSawFromWhereItStands) {
  const LessonRun r = run_lesson("saw", 4, false, "--bug skip --culprit 0 --at-step 1 --steps 1");
  const std::string& out = r.outcome.output;
  static const std::regex saw(R"(^  rank (\d) saw: lesson 14 step 1 gradients: )"
                              R"(all_reduce \(ring, 161 Float elements\) step \d of 6 \(reduce-scatter\) failed\. )"
                              R"(rank \1: (send to|recv from) rank (\d) )");
  std::vector<int> seen, peers;
  for (const auto& line : lines_of(out)) {
    std::smatch m;
    if (!std::regex_search(line, m, saw)) continue;
    seen.push_back(std::stoi(m[1]));
    peers.push_back(std::stoi(m[3]));
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3})) << out;  // rank 0 left its loop and said so
  EXPECT_TRUE(contains(out, "  rank 0: --bug skip: leaves its loop at step 1 without all_reduce #1")) << out;
  // In the ring rank 2 waits for rank 1, itself stuck waiting for rank 0.
  EXPECT_TRUE(std::any_of(peers.begin(), peers.end(), [](int peer) { return peer != 0; }))
      << "some rank names an innocent peer\n" << out;
}

// One process, the whole batch, LibTorch's SGD: the losses the lesson's
// ranks must print.
std::vector<double> one_process_losses(int steps, int batch, double lr) {
  auto model = lesson14::make_model();
  lesson14::fill_weights(model, 0);  // rank 0's, which the broadcast gives every rank
  torch::optim::SGD sgd(model->parameters(), lr);
  std::vector<double> losses;
  for (int s = 1; s <= steps; ++s) {
    const lesson14::Batch b = lesson14::batch_of_step(s, batch);
    distlab::compat::zero_grad(sgd);
    at::Tensor loss = torch::nn::functional::mse_loss(model->forward(b.x), b.y);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

void expect_losses_of_one_process(const std::string& output, int steps, int batch, double lr) {
  static const std::regex row(R"(^  step (\d+)  loss ([\d.]+)   one process)");
  std::vector<double> printed;
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) printed.push_back(std::stod(m[2]));
  }
  const std::vector<double> reference = one_process_losses(steps, batch, lr);
  ASSERT_EQ(printed.size(), reference.size()) << output;
  for (size_t s = 0; s < reference.size(); ++s) EXPECT_NEAR(printed[s], reference[s], 2e-6) << "step " << s + 1;
  EXPECT_LT(reference.back(), reference.front()) << "the model should learn";
}

TEST(Lesson14, NoBugTrainsAsOneProcessAndExitsZero) {
  const LessonRun r = run_lesson("none", 4, false, "--steps 6 --batch 48 --lr 0.2");
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.output;
  EXPECT_LT(r.seconds, 30);
  expect_losses_of_one_process(r.outcome.output, 6, 48, 0.2);
  const std::string printed = diagnosis_on_threads(r);
  EXPECT_EQ(printed, "read 4 flight file(s): ranks 0-3 of 4\nno rank is waiting: every recorded operation completed\n");
}

TEST(Lesson14, SkipOnGlooProcessesIsFoundByTheRankThatReports) {
  const int ranks = 3, culprit = 1, k = 2;
  const LessonRun r = run_lesson("gloo_skip", ranks, true, "--bug skip --culprit 1 --at-step 2 --batch 24");
  const LessonRun rank0 = as_printed_by(r, 0);  // rank 0 reports
  const std::string printed = printed_diagnosis(rank0.outcome.output);
  expect_found(rank0, printed, "skip", culprit, k);
  EXPECT_TRUE(contains(printed, "read 3 flight file(s): ranks 0-2 of 3")) << printed;
  EXPECT_TRUE(contains(printed, "ranks 0, 2 are in all_reduce #3 (lesson 14 step 2 gradients) of group world"))
      << printed;
  EXPECT_TRUE(contains(printed, "rank 1 never entered it: its last operation in world was reduce #2 "
                                "(lesson 14 step 1 loss), completed at"))
      << printed;
  // The culprit was alive, busy elsewhere, until the launcher stopped it.
  EXPECT_TRUE(contains(lines_of_rank(r.outcome.output, 1), "rank 1 was stopped by SIGTERM from outside"))
      << r.outcome.output;
}

// Rank 0 is SIGKILLed: rank 1 reports, from the survivors' files.
TEST(Lesson14, DeadOnGlooProcessesIsFoundFromTheSurvivorsFiles) {
  const int ranks = 3, culprit = 0, k = 3;
  const LessonRun r = run_lesson("gloo_dead", ranks, true, "--bug dead --culprit 0 --at-step 3 --batch 24");
  const LessonRun rank1 = as_printed_by(r, 1);
  const std::string printed = printed_diagnosis(rank1.outcome.output);
  expect_found(rank1, printed, "dead", culprit, k);
  EXPECT_TRUE(contains(r.outcome.output, "distlab-run: rank 0 (pid ")) << r.outcome.output;
  EXPECT_TRUE(contains(r.outcome.output, "was killed by SIGKILL")) << r.outcome.output;
  EXPECT_TRUE(contains(printed, "read 2 flight file(s): ranks 1, 2 of 3; none from rank 0")) << printed;
  EXPECT_TRUE(contains(printed, "rank 0 left the job")) << printed;  // the wording may gain the exit code
  // Reaped by the launcher (or a zombie): rank 1 did not wait for its file.
  EXPECT_TRUE(contains(rank1.outcome.output, "rank 0's process (pid ")) << rank1.outcome.output;
  EXPECT_TRUE(contains(rank1.outcome.output, ") is gone: no file will come from it")) << rank1.outcome.output;
  for (int w : {1, 2})
    EXPECT_TRUE(contains(printed, "rank " + std::to_string(w) + " waits for it in all_reduce #5 of group world "
                                                               "(lesson 14 step 3 gradients)"))
        << printed;
}

// torchrun's agent looks at its workers every 5 s (--monitor_interval), so
// the skipping rank is stopped, and writes its file, long after the others
// failed: rank 0 asks it for its file with SIGUSR1.
TEST(Lesson14, SkipUnderTorchrunIsFoundByAskingTheSilentRank) {
  const std::string torchrun = "/usr/bin/torchrun";
  DISTLAB_SKIP_OR_FAIL_WITHOUT(std::filesystem::exists(torchrun),
                               torchrun + " is not installed (apt-get install python3-torch)");
  const int ranks = 3, culprit = 2, k = 1;
  LessonRun r;
  r.dir = testing::TempDir() + "distlab_hang_torchrun";
  std::filesystem::remove_all(r.dir);
  const auto start = std::chrono::steady_clock::now();
  r.outcome = distlab::lessons::testing::run(torchrun + " --standalone --nproc_per_node 3 --redirects 1 --tee 1 "
                                             "--no_python " + LESSON_14 + " --backend gloo --flight-dir " + r.dir +
                                             " --bug skip --culprit 2 --at-step 1 --batch 24",
                                             "< /dev/null");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LessonRun rank0 = r;
  rank0.outcome.output = lines_with(r.outcome.output, "[default0]:");
  const std::string printed = printed_diagnosis(rank0.outcome.output);
  expect_found(rank0, printed, "skip", culprit, k);
  EXPECT_TRUE(contains(rank0.outcome.output, "rank 2 has written no file: asked it for one (SIGUSR1 to its pid "))
      << r.outcome.output;
  EXPECT_TRUE(contains(printed, "ranks 0, 1 are in all_reduce #1 (lesson 14 step 1 gradients) of group world"))
      << printed;
}

TEST(Lesson14, NoBugOnGlooProcessesTrainsAsOneProcess) {
  const LessonRun r = run_lesson("gloo_none", 2, true, "--steps 3");
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.output;
  EXPECT_LT(r.seconds, 30);
  expect_losses_of_one_process(lines_of_rank(r.outcome.output, 0), 3, 32, 0.3);
  EXPECT_TRUE(contains(printed_diagnosis(lines_of_rank(r.outcome.output, 0)),
                       "no rank is waiting: every recorded operation completed"))
      << r.outcome.output;
}

TEST(Lesson14, BadFlagsAreRefusedWithTheFix) {
  const LessonRun culprit = run_lesson("bad_culprit", 4, false, "--bug skip --culprit 4");
  EXPECT_NE(culprit.outcome.status, 0);
  EXPECT_TRUE(contains(culprit.outcome.output, "--culprit 4 is not a rank of this 4-rank job: pick one of 0..3"))
      << culprit.outcome.output;
  const LessonRun step = run_lesson("bad_step", 2, false, "--bug dead --at-step 9 --steps 5");
  EXPECT_NE(step.outcome.status, 0);
  EXPECT_TRUE(contains(step.outcome.output, "--at-step 9 is not a step of this run: pick one of 1..5"))
      << step.outcome.output;
  const LessonRun both = run_lesson("bad_timeouts", 2, false, "--timeout-s 1 --timeout-ms 1000");
  EXPECT_NE(both.outcome.status, 0);
  EXPECT_TRUE(contains(both.outcome.output, "--timeout-ms excludes --timeout-s")) << both.outcome.output;
}

}  // namespace
