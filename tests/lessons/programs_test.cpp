// The lesson programs and distlab-bench collective and zero, run as a user runs them:
// they exit 0, their correctness columns (#wrong) are all zero, the story
// numbers are the slides' (35 s sequential, 15 s as a tree for 8 ranks),
// the DDP lessons end equal to one process and count the bytes worked out here,
// and bad flags end with a message and a non-zero exit. Every run is kept
// short and bounded by `timeout`.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/simulator.hpp"
#include "run_program.hpp"
#include "support/small_corpus.hpp"

namespace {

using distlab::lessons::testing::lines_of;
using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::run;

// The #wrong column (the last) of every table row of lessons 03-05.
std::vector<long long> wrong_column(const std::string& output) {
  static const std::regex row(R"(^  (sequential|tree|native|reduce_broadcast|ring|halving_doubling)\s.*\s(\d+)$)");
  std::vector<long long> counts;
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) counts.push_back(std::stoll(m[2]));
  }
  return counts;
}

void expect_rows_all_right(const Outcome& r, size_t rows) {
  const auto wrong = wrong_column(r.output);
  ASSERT_EQ(wrong.size(), rows) << r.output;
  for (long long w : wrong) EXPECT_EQ(w, 0) << r.output;
}

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

TEST(Lesson01, RunsOnThreadRanksAndShowsEqualGradients) {
  const Outcome r = run(std::string(LESSON_01) + " --backend threads --ranks 4");
  ASSERT_EQ(r.status, 0) << r.output;
  // Parts 3 and 5 each print the largest difference between two gradients.
  static const std::regex difference(R"(largest difference: (\S+))");
  int seen = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), difference); it != std::sregex_iterator();
       ++it, ++seen)
    EXPECT_LT(std::stod((*it)[1]), 1e-9) << r.output;
  EXPECT_EQ(seen, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 3 (houses 4 8):")) << r.output;
}

TEST(Lesson01, MoreRanksThanHouses) {
  const Outcome r = run(std::string(LESSON_01) + " --backend threads --ranks 11 --accumulate 3 --epochs 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 10 (houses none):")) << r.output;
}

TEST(Lesson02, TheStoryIs35SecondsAndEveryByteArrives) {
  const Outcome r = run(std::string(LESSON_02) + " --backend threads --ranks 8 --iters 1");
  ASSERT_EQ(r.status, 0) << r.output;
  // The slides: 5 MB to 7 friends at 1 MB/s, one after another, 35 s; all at once, still 35 s.
  static const std::regex last_friend(R"(friend 7 has the file after\s+35\.0 s)");
  static const std::regex together(R"(all at once \(isend to all\)\s+35\.0 s)");
  EXPECT_TRUE(std::regex_search(r.output, last_friend)) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, together)) << r.output;
  EXPECT_TRUE(contains(r.output, "bytes the friends received wrong: 0")) << r.output;
}

TEST(Lesson03, TreeIs15SecondsAndWeightsEndEqual) {
  const Outcome r = run(std::string(LESSON_03) + " --backend threads --ranks 8 --iters 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(sequential\s+7 steps, 35\.0 s)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(tree\s+3 steps, 15\.0 s)"))) << r.output;
  expect_rows_all_right(r, 3);
  // Part 4: rank, sum before, sum after. Every "after" equals rank 0's "before".
  static const std::regex weights(R"(^\s+(\d+)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)$)");
  std::vector<std::pair<std::string, std::string>> sums;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (std::regex_match(line, m, weights)) sums.push_back({m[2], m[3]});
  }
  ASSERT_EQ(sums.size(), 8u) << r.output;
  for (const auto& [before, after] : sums) EXPECT_EQ(after, sums[0].first) << r.output;
  EXPECT_NE(sums[1].first, sums[0].first) << "ranks should start from different weights\n" << r.output;
}

TEST(Lesson03, AnyRootAndWorldSize) {
  const Outcome r = run(std::string(LESSON_03) + " --backend threads --ranks 6 --root 3 --mb 0.3 --iters 1");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_rows_all_right(r, 3);
}

TEST(Lesson04, TreeTakesLog2Steps) {
  const Outcome r = run(std::string(LESSON_04) + " --backend threads --ranks 8 --iters 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(tree\s+3 steps, 15\.0 s)"))) << r.output;
  expect_rows_all_right(r, 3);
}

TEST(Lesson04, OddRanksOtherRootMax) {
  const Outcome r = run(std::string(LESSON_04) + " --backend threads --ranks 5 --root 3 --op max --mb 0.3 --iters 1");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_rows_all_right(r, 3);
}

TEST(Lesson05, ThreeAlgorithmsAgreeWithNative) {
  for (const std::string flags : {"--ranks 4 --op sum", "--ranks 6 --op avg", "--ranks 3 --op max"}) {
    const Outcome r = run(std::string(LESSON_05) + " --backend threads --mb 0.5 --iters 1 " + flags);
    ASSERT_EQ(r.status, 0) << flags << "\n" << r.output;
    expect_rows_all_right(r, 4);
  }
}

TEST(Lesson05, UnderTheLauncherWithGloo) {
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 3 --master-port 0 --no-prefix -- " + LESSON_05 +
                    " --backend gloo --mb 0.2 --iters 1 --no-steps");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gloo backend, 3 ranks")) << r.output;
  expect_rows_all_right(r, 4);
}

// Lesson 10's peak activations per stage, "gpipe" -> "4 4", from the timing
// table: schedule, v, step, measured, simulated, formula, peaks (simulated).
std::map<std::string, std::string> measured_peaks(const std::string& output) {
  static const std::regex row(R"(^   (\S+)\s+\d\s+[\d.]+ \S+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d ]+) \(([\d ]+)\)$)");
  std::map<std::string, std::string> peaks;
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) peaks[m[1]] = m[2];
  }
  return peaks;
}

// Lesson 10 checks every schedule against the unsplit model itself and exits
// non-zero when one differs; here: that it says so, that the activations a
// stage held are the textbook's (GPipe m = 4 on both stages, 1F1B p - s =
// 2 and 1), and that cutting along dim 0 changes the loss.
void expect_lesson_10_right(const Outcome& r) {
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "Every schedule: loss and every gradient equal to the unsplit model's")) << r.output;
  const auto peaks = measured_peaks(r.output);
  ASSERT_EQ(peaks.size(), 5u) << r.output;
  EXPECT_EQ(peaks.at("gpipe"), "4 4") << r.output;
  EXPECT_EQ(peaks.at("1f1b"), "2 1") << r.output;
  std::smatch m;
  const std::regex unsplit(R"(Unsplit model on the whole batch, one process: loss ([\d.]+))");
  const std::regex dim0(R"(cut along dim 0 \(the tutorial's x\.chunk\(4\)\): loss ([\d.]+))");
  ASSERT_TRUE(std::regex_search(r.output, m, unsplit)) << r.output;
  const double unsplit_loss = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(r.output, m, dim0)) << r.output;
  EXPECT_GT(std::abs(std::stod(m[1]) - unsplit_loss), 1e-3) << r.output;
}

TEST(Lesson10, EveryScheduleEqualsTheUnsplitModelOnThreadRanks) {
  expect_lesson_10_right(run(std::string(LESSON_10) + " --backend threads --ranks 2 --steps 1"));
}

// The GPT with a mixture of experts in every layer (dropless, no auxiliary
// losses): every schedule still ends with the unsplit model's loss and gradients.
TEST(Lesson10, WithExpertsEveryScheduleEqualsTheUnsplitModel) {
  const Outcome r = run(std::string(LESSON_10) + " --backend threads --ranks 2 --steps 1 --experts 4 --top-k 2");
  EXPECT_TRUE(contains(r.output, "Each layer's feed-forward: 4 experts, top-2, dropless")) << r.output;
  expect_lesson_10_right(r);
}

TEST(Lesson10, UnderTheLauncherWithGloo) {
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 2 --master-port 0 --no-prefix -- " + LESSON_10 +
                        " --backend gloo --steps 1");
  expect_lesson_10_right(r);
  EXPECT_TRUE(contains(r.output, "gloo backend, 2 ranks")) << r.output;
}

// torch's newer schedules, by name: each equal to the unsplit model, and the
// activations each stage held, read from the run's trace, are those of the
// schedule played by the simulator (with any costs: a stage's F and its B or
// W run on one rank, so the count follows that rank's order alone). ZBV and
// DualPipeV put 4 stages on 2 ranks in a V.
TEST(Lesson10, TorchsNewerSchedulesByName) {
  using namespace distlab::pipeline;
  const Outcome r = run(std::string(LESSON_10) +
                        " --backend threads --ranks 2 --steps 1 --schedules interleaved_zb,zbv,dualpipev");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "Every schedule: loss and every gradient equal to the unsplit model's")) << r.output;
  EXPECT_TRUE(contains(r.output, "(0F3;3B1)OVERLAP_F_B")) << r.output;  // part 2 prints the compound
  const auto peaks = measured_peaks(r.output);
  ASSERT_EQ(peaks.size(), 3u) << r.output;
  for (const std::string name : {"interleaved_zb", "zbv", "dualpipev"}) {
    const ScheduleKind kind = parse_kind(name);
    const Simulation sim = simulate(make_schedule(kind, 2, /*microbatches=*/4, stages_per_rank_for(kind, 2)), ActionCosts{});
    std::string want;
    for (int peak : sim.peak_activations) want += (want.empty() ? "" : " ") + std::to_string(peak);
    EXPECT_EQ(peaks.at(name), want) << name << "\n" << r.output;
  }
}

// A shape a schedule's rule refuses is skipped with the rule, not a crash:
// DualPipeV on 4 ranks needs m >= 8.
TEST(Lesson10, ARefusedShapeIsSkippedWithTheRule) {
  const Outcome r = run(std::string(LESSON_10) +
                        " --backend threads --ranks 4 --layers 8 --steps 1 --schedules 1f1b,dualpipev");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dualpipev     2  skipped: dualpipev p=4 m=4: DualPipeV needs at least as many "
                                 "microbatches as stages (m >= 2p = 8); choose m >= 8"))
      << r.output;
  EXPECT_EQ(measured_peaks(r.output).count("1f1b"), 1u) << r.output;
}

// Lessons 06-08: DDP. Each lesson checks its own result and exits non-zero
// when it is off; the tests also read the printed numbers and hold them to
// values worked out here.

// "against one process: largest difference X   across ranks: Y   OK" of lesson 06.
void expect_three_equal_to_one_process(const Outcome& r) {
  static const std::regex check(R"(^  (from scratch|naive \(library\)|DistributedDataParallel)\s+against one process: )"
                                R"(largest difference (\S+)\s+across ranks: (\S+)\s+(OK|DIFFERENT)$)");
  int rows = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_match(line, m, check)) continue;
    ++rows;
    EXPECT_LT(std::stod(m[2]), 1e-5) << line;
    EXPECT_LT(std::stod(m[3]), 1e-5) << line;
    EXPECT_EQ(m[4], "OK") << line;
  }
  EXPECT_EQ(rows, 3) << r.output;
  // The mean of the ranks' losses is the whole batch's loss (equal shares).
  static const std::regex loss(R"(mean of the ranks' losses (\S+)\s+one process, whole batch (\S+))");
  int losses = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), loss); it != std::sregex_iterator();
       ++it, ++losses)
    EXPECT_NEAR(std::stod((*it)[1]), std::stod((*it)[2]), 1e-5) << (*it)[0];
  EXPECT_GT(losses, 0) << r.output;
}

TEST(Lesson06, FiveStepsNaiveAndDdpEqualOneProcess) {
  const Outcome r = run(std::string(LESSON_06) + " --backend threads --ranks 4 --steps 4");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_three_equal_to_one_process(r);
  // Step 1: after the broadcast every rank holds rank 0's "before".
  static const std::regex sums(R"(^\s+(\d+)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)$)");
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (std::regex_match(line, m, sums)) rows.push_back({m[2], m[3]});
  }
  ASSERT_EQ(rows.size(), 4u) << r.output;
  for (const auto& [before, after] : rows) EXPECT_EQ(after, rows[0].first) << r.output;
  EXPECT_NE(rows[1].first, rows[0].first) << "ranks should start from different weights\n" << r.output;
}

TEST(Lesson06, OddRanksOtherAlgorithm) {
  const Outcome r = run(std::string(LESSON_06) +
                        " --backend threads --ranks 3 --rows-per-rank 5 --steps 3 --algorithm halving_doubling");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_three_equal_to_one_process(r);
}

TEST(Lesson06, UnderTheLauncherWithGloo) {
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 2 --master-port 0 --no-prefix -- " + LESSON_06 +
                        " --backend gloo --steps 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gloo backend, 2 ranks")) << r.output;
  expect_three_equal_to_one_process(r);
}

// Lesson 07's table: backwards, synced, all-reduces, bytes/rank, time, vs 1 process, across ranks.
struct NoSyncRow {
  long long backwards = -1, synced = -1, all_reduces = -1;
  double megabytes = -1, vs_reference = 1, across = 1;
};
NoSyncRow no_sync_row(const std::string& output, const std::string& name) {
  const std::regex row("^  " + name + R"(\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+) MB\s+\S+ \S+\s+(\S+)\s+(\S+)$)");
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (std::regex_match(line, m, row))
      return {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stod(m[4]), std::stod(m[5]), std::stod(m[6])};
  }
  return {};
}

TEST(Lesson07, NoSyncEqualsTheKFoldBatchWithOneKthOfTheBytes) {
  const int k = 3, steps = 2;
  const Outcome r = run(std::string(LESSON_07) + " --backend threads --ranks 2 --accumulate 3 --steps 2 --rows 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "bytes\n   as counted above: OK")) << r.output;
  const NoSyncRow synced = no_sync_row(r.output, "without no_sync");
  const NoSyncRow local = no_sync_row(r.output, "with no_sync");
  // 128*512+512 + 512*512+512 + 512*16+16 = 336,912 float32 parameters.
  const double model_mb = 336912 * 4 / 1e6;
  EXPECT_EQ(synced.backwards, k * steps) << r.output;
  EXPECT_EQ(synced.synced, k * steps) << r.output;
  EXPECT_EQ(local.backwards, k * steps) << r.output;
  EXPECT_EQ(local.synced, steps) << r.output;
  EXPECT_EQ(synced.all_reduces, k * local.all_reduces) << r.output;
  EXPECT_NEAR(local.megabytes, steps * model_mb, 0.006) << r.output;
  EXPECT_NEAR(synced.megabytes, k * steps * model_mb, 0.006) << r.output;
  for (const NoSyncRow& row : {synced, local}) {
    EXPECT_LT(row.vs_reference, 1e-5) << r.output;
    EXPECT_LT(row.across, 1e-5) << r.output;
  }
}

TEST(Lesson07, UnderTheLauncherWithGloo) {
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 2 --master-port 0 --no-prefix -- " + LESSON_07 +
                        " --backend gloo --accumulate 2 --steps 2 --rows 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gloo backend, 2 ranks")) << r.output;
  EXPECT_TRUE(contains(r.output, "counted above: OK")) << r.output;
}

// A time as lessons::format_seconds prints it ("%.1f s", "%.2f ms", "%.1f
// us"), in seconds, and the most its rounding moved it: half a unit of the
// last digit printed.
struct PrintedSeconds {
  double value = 0, rounding = 0;
};
PrintedSeconds printed_seconds(const std::string& number, const std::string& unit) {
  const double scale = unit == "s" ? 1.0 : unit == "ms" ? 1e-3 : 1e-6;
  const double last_digit = unit == "ms" ? 0.01 : 0.1;
  return {std::stod(number) * scale, 0.5 * last_digit * scale};
}

// Lesson 08 on a small model: 4 x Linear(512, 512), each weight 1 MiB.
void expect_lesson08_parts(const Outcome& r) {
  // Part 1: the plan before and after the rebuild, every parameter in one bucket of each.
  static const std::regex bucket_line(R"(^    bucket \d+ .* (\d+) params:)");
  int plans = 0, params = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (std::regex_search(line, m, bucket_line)) params += std::stoi(m[1]);
    if (contains(line, "bucket plan before") || contains(line, "after the rebuild")) ++plans;
  }
  EXPECT_EQ(plans, 2) << r.output;
  EXPECT_EQ(params, 2 * 8) << r.output;
  // Part 2: backward and every bucket of the traced step as a bar.
  EXPECT_TRUE(contains(r.output, "backward computes")) << r.output;
  EXPECT_TRUE(contains(r.output, "all-reduce bucket 0")) << r.output;
  // Part 3: hidden <= all-reduce, and the fraction is their quotient, as
  // far as the printed numbers' rounding lets one tell.
  static const std::regex times(
      R"(3\. Overlap: ([\d.]+) (s|ms|us) of all-reduce in \d+ buckets, ([\d.]+) (s|ms|us) of it before backward)");
  static const std::regex fraction(R"(overlap fraction (\d+)%)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, times)) << r.output;
  const PrintedSeconds all_reduce = printed_seconds(m[1], m[2]), hidden = printed_seconds(m[3], m[4]);
  ASSERT_TRUE(std::regex_search(r.output, m, fraction)) << r.output;
  const int percent = std::stoi(m[1]);
  EXPECT_LE(hidden.value - hidden.rounding, all_reduce.value + all_reduce.rounding) << r.output;
  // The quotient of any two times that print as these, printed with "%.0f%%".
  const double least = std::max(0.0, hidden.value - hidden.rounding) / (all_reduce.value + all_reduce.rounding);
  const double most = all_reduce.value > all_reduce.rounding
                          ? std::min(1.0, (hidden.value + hidden.rounding) / (all_reduce.value - all_reduce.rounding))
                          : 1.0;
  EXPECT_GE(percent, 100 * least - 0.5) << r.output;
  EXPECT_LE(percent, 100 * most + 0.5) << r.output;
  // Part 4: five caps, the naive version and no communication; one bucket
  // per parameter is 8 buckets, the naive version 8 all-reduces.
  static const std::regex sweep(R"(^  (1 MiB|5 MiB|25 MiB|100 MiB|one per parameter|naive \(after backward\)|no communication)\s+(\d+)\s)");
  std::vector<std::pair<std::string, int>> rows;
  for (const auto& line : lines_of(r.output))
    if (std::regex_search(line, m, sweep)) rows.push_back({m[1], std::stoi(m[2])});
  ASSERT_EQ(rows.size(), 7u) << r.output;
  EXPECT_EQ(rows[4].second, 8) << r.output;
  EXPECT_EQ(rows[5].second, 8) << r.output;
  EXPECT_EQ(rows[6].second, 0) << r.output;
  // 1 MiB caps hold at most a weight and a bias: at least 4 buckets.
  EXPECT_GE(rows[0].second, 4) << r.output;
}

TEST(Lesson08, PlanTraceOverlapAndSweep) {
  const Outcome r = run(std::string(LESSON_08) + " --backend threads --ranks 2 --width 512 --layers 4 --rows 16 "
                                                 "--steps 1");
  ASSERT_EQ(r.status, 0) << r.output;
  expect_lesson08_parts(r);
}

TEST(Lesson08, UnderTheLauncherWithGlooAndATraceFile) {
  const std::string trace = ::testing::TempDir() + "lesson08_trace.json";
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 2 --master-port 0 --no-prefix -- " + LESSON_08 +
                        " --backend gloo --width 512 --layers 4 --rows 16 --steps 1 --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_lesson08_parts(r);
  // One file per process; rank 0's holds the buckets' all-reduces.
  FILE* f = std::fopen((::testing::TempDir() + "lesson08_trace.rank0.json").c_str(), "r");
  ASSERT_NE(f, nullptr) << r.output;
  std::string text;
  char chunk[4096];
  for (size_t n = 0; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, n);
  std::fclose(f);
  EXPECT_TRUE(contains(text, "all-reduce bucket 0")) << text.substr(0, 2000);
}

// The capstone's 2 stages x 2 replicas as 4 thread ranks and as 4 gloo
// processes (gloo groups for the pipelines and the replicas), 2 x 2 x 2 as
// 8 of each (the tensor groups too), and 2 x 1 x 2 context ranks (the ring
// over gloo), and experts spread over 2 of 4 replicas (the all-to-alls over
// gloo): the same arithmetic, so the same final parameters, digest for
// digest.
std::string capstone_digest(const Outcome& r) {
  std::smatch m;
  static const std::regex digest(R"(final parameters digest (\S+))");
  EXPECT_TRUE(std::regex_search(r.output, m, digest)) << r.output;
  return m.size() > 1 ? std::string(m[1]) : std::string();
}

struct CapstoneRun {
  std::string name, flags;
  int processes;
};
void PrintTo(const CapstoneRun& run, std::ostream* os) { *os << run.name << " (" << run.processes << " processes)"; }

class Lesson11 : public ::testing::TestWithParam<CapstoneRun> {};

TEST_P(Lesson11, ThreadRanksAndGlooProcessesEndWithTheSameParameters) {
  const CapstoneRun c = GetParam();
  const std::string flags = " --data " + distlab::test_support::small_corpus_folder() +
                            " --preset tiny --dropout 0 --epochs 1 --batches-per-epoch 3 --eval-batches 2 " + c.flags;
  const Outcome threads = run(std::string(LESSON_11) + " --backend threads" + flags);
  ASSERT_EQ(threads.status, 0) << threads.output;
  const Outcome gloo = run(std::string(DISTLAB_RUN) + " --nproc-per-node " + std::to_string(c.processes) +
                           " --master-port 0 -- " + LESSON_11 + " --backend gloo" + flags);
  ASSERT_EQ(gloo.status, 0) << gloo.output;
  EXPECT_TRUE(contains(gloo.output, "Total parameters in model:")) << gloo.output;
  const std::string a = capstone_digest(threads), b = capstone_digest(gloo);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  if (c.processes == 8)
    EXPECT_TRUE(contains(gloo.output, "tensor groups (each stage's layers cut): {0, 1} {2, 3} {4, 5} {6, 7}"))
        << gloo.output;
  if (c.name == "two_by_two") {
    // The same job over the same-host transport: shared-memory rings for
    // every group, and one copy from 64 KiB on (DDP's larger buckets
    // all-reduced where the gradients lie), the same arithmetic, the same digest.
    const Outcome shm = run("env DISTLAB_SHM_SINGLE_COPY=1 " + std::string(DISTLAB_RUN) +
                            " --nproc-per-node 4 --master-port 0 -- " + LESSON_11 + " --backend auto" + flags);
    ASSERT_EQ(shm.status, 0) << shm.output;
    EXPECT_TRUE(contains(shm.output, "talk through shared memory (one copy (process_vm_readv) from 64 KiB"))
        << shm.output;
    EXPECT_EQ(capstone_digest(shm), a);
  }
  if (c.name == "experts_parallel2")
    EXPECT_TRUE(contains(gloo.output, "expert groups: {0, 2} {1, 3}   the same experts (gradients summed, / 2): "
                                      "{0} {2} {1} {3}"))
        << gloo.output;
  if (c.name == "context2")
    EXPECT_TRUE(contains(gloo.output, "context groups (each sequence split, ring attention, zigzag chunks): {0, 1} "
                                      "{2, 3}"))
        << gloo.output;
}

INSTANTIATE_TEST_SUITE_P(Capstone, Lesson11,
                         ::testing::Values(CapstoneRun{"two_by_two", "", 4}, CapstoneRun{"tensor2", "--tensor 2", 8},
                                           // A V schedule: rank 0 holds the first and the last layer.
                                           CapstoneRun{"dualpipev", "--layers 4 --schedule dualpipev", 4},
                                           // Each sequence split over 2 context ranks (ring, zigzag).
                                           CapstoneRun{"context2", "--replicas 1 --context 2", 4},
                                           // Each stage's experts spread over its 2 replicas (all-to-all
                                           // over gloo). Groups of 2 add alike: a + b is b + a, bit for bit
                                           // (4 replicas would not: gloo's ring adds in its own order).
                                           CapstoneRun{"experts_parallel2",
                                                       "--experts 4 --top-k 2 --capacity-factor 1.25 --expert-parallel 2",
                                                       4}),
                         [](const auto& info) { return info.param.name; });

// Activation recomputation (--recompute full, selective, matmuls) on 2
// stages x 2 replicas of gloo processes, dropout on (each process its own
// generator), and full on 2 stages x 2 tensor ranks (whose alike masks
// between the cut regions only a full recomputation draws again): the
// same final parameters bit for bit as keeping every activation, under
// DDP and under ZeRO-1 and 2 (whose hooks and end-of-backward callbacks
// see the recomputed layers' gradients arrive as they would in a plain
// backward).
TEST(Lessons, RecomputationEndsWithTheSameParametersWithDropoutOn) {
  const std::string flags = " --data " + distlab::test_support::small_corpus_folder() +
                            " --preset tiny --epochs 1 --batches-per-epoch 3 --eval-batches 2";
  auto digest_of = [&](const std::string& more) {
    const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 4 --master-port 0 -- " + LESSON_11 +
                          " --backend gloo" + flags + more);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "dropout 0.2 (preset)")) << r.output;
    EXPECT_EQ(contains(r.output, "activations: "), !contains(more, "none")) << r.output;  // the plan's line
    return capstone_digest(r);
  };
  const std::string plain = digest_of(" --recompute none");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(digest_of(" --recompute full --zero 2"), plain);
  EXPECT_EQ(digest_of(" --recompute selective"), plain);
  EXPECT_EQ(digest_of(" --recompute matmuls --zero 1"), plain);
  // Tensor ranks draw the masks between their regions alike, from a
  // generator of their own: it too is set back for the recomputation.
  const std::string cut = digest_of(" --replicas 1 --tensor 2 --recompute none");
  ASSERT_FALSE(cut.empty());
  EXPECT_NE(cut, plain);
  EXPECT_EQ(digest_of(" --replicas 1 --tensor 2 --recompute full"), cut);
}

// Lesson 17 on one rank: every byte it measures equals its formula (the
// lesson exits 1 otherwise and marks the row), the three recomputation
// policies give the plain gradients bit for bit, and the loss scaler both
// skips and takes steps on the real gradients.
TEST(Lessons, MemoryMeasuresEveryByteBesideItsFormula) {
  const Outcome r = run(std::string(LESSON_17) + " --layers 2 --seq 16 --batch 4 --hidden 32 --heads 4 --ffn 64 "
                                                 "--repeats 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "DIFFER")) << r.output;
  int bitwise = 0;
  for (size_t at = r.output.find("bit for bit"); at != std::string::npos; at = r.output.find("bit for bit", at + 1))
    ++bitwise;
  EXPECT_EQ(bitwise, 3) << r.output;
  EXPECT_TRUE(contains(r.output, "inf in fp16, step skipped")) << r.output;
  EXPECT_TRUE(contains(r.output, "finite, step taken")) << r.output;
  EXPECT_TRUE(contains(r.output, "every parameter and gradient is float32")) << r.output;
}

TEST(Lessons, BadFlagsExitNonZeroWithAMessage) {
  struct Case {
    std::string program, flags, message;
  };
  const std::vector<Case> cases = {
      {LESSON_01, "--ranks 0", "--ranks"},
      {LESSON_17, "--backend threads --ranks 2", "thread ranks share one allocator"},
      {LESSON_18, "--profile /nonexistent/profile.json", "cannot be opened (make one with distlab-plan calibrate"},
      {LESSON_18, "--ranks 0", "--ranks"},
      {LESSON_01, "--accumulate 0", "--accumulate"},
      {LESSON_02, "--backend mpi", "--backend"},
      {LESSON_02, "--backend threads --ranks 1", "at least 2 ranks"},
      {LESSON_03, "--backend threads --ranks 4 --root 4", "--root 4 is not a rank"},
      {LESSON_03, "--mb ten", "--mb"},
      {LESSON_04, "--op median", "--op"},
      {LESSON_05, "--no-such-flag", "no-such-flag"},
      {LESSON_10, "--backend threads --ranks 5", "needs 2 to 4 ranks"},
      {LESSON_10, "--batch 2 --microbatches 4", "cannot be cut"},
      // Every schedule asked for skipped (zbv needs 8 stages of the 4 layers): nothing was compared.
      {LESSON_10, "--backend threads --ranks 4 --schedules zbv --steps 1", "none of the schedules asked for ran"},
      {LESSON_13, "--backend threads --ranks 4 --heads 2",
       "lesson 13 cuts the layer over t = 1, 2, 4 on 4 ranks, but --heads 2 does not split among t=4"},
      {LESSON_11, "--schedule nosuch", "unknown schedule 'nosuch'"},
      {LESSON_11, "--preset tiny --schedule interleaved", "stages per rank need 4 layers, the model has 2: use --layers 4"},
      {LESSON_06, "--algorithm tree", "--algorithm"},
      {LESSON_07, "--accumulate 0", "--accumulate"},
      {LESSON_08, "--layers 0", "--layers"},
      {DISTLAB_BENCH, "ddp --parts all", "--parts"},
      {DISTLAB_BENCH, "collective --collective broadcast --algorithm ring", "does not implement"},
      {DISTLAB_BENCH, "collective -b 1M -e 1K", "larger than"},
      {DISTLAB_BENCH, "collective --dtype int8", "--dtype"},
      {DISTLAB_BENCH, "p2p -b 1M -e 1K", "-b 1M is larger than -e 1K: give the smallest size to -b"},
      {DISTLAB_BENCH, "foo", "no benchmark 'foo'; name one of capstone, collective,"},
      {DISTLAB_BENCH, "", "distlab-bench: name one of capstone, collective,"},
      {LESSON_09, "--expect-digest zz", "'zz' is not a digest: 0x and 8 hex digits"},
      {DISTLAB_TRACE, "foo", "no tool 'foo'; name one of merge, why"},
      {DISTLAB_TRACE, "", "distlab-trace: name one of merge, why"},
  };
  for (const auto& c : cases) {
    const Outcome r = run(c.program + " " + c.flags);
    EXPECT_NE(r.status, 0) << c.program << " " << c.flags << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.program << " " << c.flags << "\n" << r.output;
  }
}

// distlab-bench collective: every collective, native and every algorithm,
// checked against the reference for each size.
TEST(CollectiveBench, EveryCollectiveAndAlgorithmIsRight) {
  for (const std::string collective : {"broadcast", "reduce", "all_reduce", "reduce_scatter", "all_gather"}) {
    const Outcome r = run(std::string(DISTLAB_BENCH) +
                          " collective --backend threads --ranks 3 --root 1 -b 8 -e 64K -f 16 -n 2 --rounds 2 -w 0"
                          " --algorithm all --collective " + collective);
    ASSERT_EQ(r.status, 0) << collective << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "#wrong in total: 0  OK")) << collective << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "busbw against native")) << collective << "\n" << r.output;
  }
}

TEST(CollectiveBench, DtypesAndOps) {
  for (const std::string flags : {"-d half -o sum", "-d bfloat16 -o avg", "-d int64 -o avg", "-d double -o max",
                                  "-d float -o min"}) {
    const Outcome r = run(std::string(DISTLAB_BENCH) + " collective --backend threads --ranks 5 -b 1K -e 1M -f 32 -n 1 "
                      "-w 0 --algorithm all " + flags);
    ASSERT_EQ(r.status, 0) << flags << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "#wrong in total: 0  OK")) << flags << "\n" << r.output;
  }
}

TEST(CollectiveBench, ColumnsAsNcclTests) {
  const Outcome r = run(std::string(DISTLAB_BENCH) +
                        " collective --backend threads --ranks 4 -b 4K -e 16K -f 2 -n 2 -w 1 --algorithm ring");
  ASSERT_EQ(r.status, 0) << r.output;
  // size count type redop root algorithm time algbw busbw #wrong
  static const std::regex row(
      R"(^\s+(\d+)\s+(\d+)\s+float\s+sum\s+-1\s+ring\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$)");
  int rows = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    ++rows;
    EXPECT_EQ(std::stoll(m[1]), 4 * std::stoll(m[2])) << line;
    const double time_us = std::stod(m[3]), algbw = std::stod(m[4]), busbw = std::stod(m[5]);
    EXPECT_NEAR(algbw, std::stod(m[1]) / (time_us * 1e-6) / 1e9, 0.01 * algbw + 0.002) << line;
    EXPECT_NEAR(busbw, algbw * 2 * 3 / 4, 0.01 * busbw + 0.002) << line;  // all-reduce: 2(p-1)/p
    EXPECT_EQ(m[6], "0") << line;
  }
  EXPECT_EQ(rows, 3) << r.output;
}

// distlab-bench tensor on 2 thread ranks, the tiny preset: every row's
// bytes sent (read from the trace) equal the plan's, the activations rank
// 0's forward keeps (measured with the allocator) equal memory.hpp's
// derivation, and sequence parallelism keeps less than plain tensor
// parallelism of the same size.
TEST(TensorBench, BytesAndActivationsAsDerived) {
  const Outcome r = run(std::string(DISTLAB_BENCH) + " tensor --backend threads --ranks 2 --preset tiny -n 1 -w 0");
  ASSERT_EQ(r.status, 0) << r.output;
  // what t SP step predicted ratio sent predicted_sent act formula
  static const std::regex row(
      R"(^(layer|model)\s+(\d+)\s+(no|yes)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$)");
  std::map<std::string, std::string> act;  // "layer 2 yes" -> measured
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    EXPECT_EQ(m[4], m[5]) << "bytes sent against the plan: " << line;
    EXPECT_EQ(m[6], m[7]) << "activations against the derivation: " << line;
    act[std::string(m[1]) + " " + std::string(m[2]) + " " + std::string(m[3])] = m[6];
  }
  ASSERT_EQ(act.size(), 6u) << r.output;  // layer and model: t 1, t 2, t 2 with SP
  const auto bytes = [](const std::string& text) {  // "1440K" or "2609280"
    return std::stod(text) * (text.back() == 'K' ? 1024 : text.back() == 'M' ? 1024 * 1024 : 1);
  };
  for (const std::string what : {"layer", "model"}) {
    EXPECT_LT(bytes(act.at(what + " 2 no")), bytes(act.at(what + " 1 no"))) << what;
    EXPECT_LT(bytes(act.at(what + " 2 yes")), bytes(act.at(what + " 2 no"))) << what;
  }
}

// distlab-bench zero --quick on 2 gloo processes: every variant timed, and
// the bytes it measures per category equal what the ZeRO paper's accounting
// gives for its model, worked out here: Psi = 4 x (256 x 256 + 256)
// parameters, p = 2, Adam (8 bytes of state per parameter). ZeRO-1's
// reduced gradient shard is a view of its whole gradient: Psi, no more.
TEST(ZeroBench, QuickRunTimesEveryVariantAndMeasuresWhatTheAccountingSays) {
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 2 --master-port 0 --no-prefix -- " +
                        DISTLAB_BENCH + " zero --backend gloo --quick");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string variant = "(DDP|ZeRO-1|ZeRO-2|ZeRO-3|ZeRO-3 no prefetch)";
  // variant step_ms min_ms max_ms vs_ddp vs_ddp_range
  const std::regex time_row("^" + variant +
                            R"(\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+-[\d.]+\s*$)");
  // variant category measured_MB accounting_MB off_% worst_off_%
  const std::regex memory_row("^" + variant +
                              R"(\s+(parameters|gradients|optimizer state)\s+([\d.]+)\s+([\d.]+)\s+\S+\s+\S+$)");
  constexpr double kPsiMB = 4 * (256 * 256 + 256) * 4 / 1e6;  // float32 parameters, MB
  const std::map<std::string, std::array<double, 3>> expected = {
      // parameters, gradients, optimizer state (MB)
      {"DDP", {kPsiMB, kPsiMB, 2 * kPsiMB}},
      {"ZeRO-1", {kPsiMB, kPsiMB, kPsiMB}},
      {"ZeRO-2", {kPsiMB, kPsiMB / 2, kPsiMB}},
      {"ZeRO-3", {kPsiMB / 2, kPsiMB / 2, kPsiMB}},
      {"ZeRO-3 no prefetch", {kPsiMB / 2, kPsiMB / 2, kPsiMB}},
  };
  int timed = 0, measured = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (std::regex_match(line, m, time_row)) {
      ++timed;
      const double step = std::stod(m[2]), low = std::stod(m[3]), high = std::stod(m[4]);
      EXPECT_GT(low, 0) << line;
      EXPECT_LE(low, step) << line;
      EXPECT_LE(step, high) << line;
      if (m[1] == "DDP") EXPECT_EQ(std::stod(m[5]), 1.0) << line;  // DDP against itself, round by round
    } else if (std::regex_match(line, m, memory_row)) {
      ++measured;
      const int c = m[2] == "parameters" ? 0 : m[2] == "gradients" ? 1 : 2;
      const double want = expected.at(m[1])[static_cast<size_t>(c)];
      EXPECT_NEAR(std::stod(m[3]), want, 0.01) << line;  // shards differ by at most an element per bucket
      EXPECT_NEAR(std::stod(m[4]), want, 0.01) << line;
    }
  }
  EXPECT_EQ(timed, 5) << r.output;
  EXPECT_EQ(measured, 15) << r.output;
  EXPECT_TRUE(contains(r.output, "# target ZeRO-1 <= 1.1x DDP: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "# target every category within 5 % of the accounting: DDP met; ZeRO-1 met; "
                                 "ZeRO-2 met; ZeRO-3 met; ZeRO-3 no prefetch met;"))
      << r.output;
}

}  // namespace
