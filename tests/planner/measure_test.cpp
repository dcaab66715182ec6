// Measuring each rank's own memory (planner/measure.hpp): the peaks read
// from a log by rank, and a real layout of the tiny preset run under
// distlab-run, a process a rank, each metering itself; a layout lesson 11
// refuses reported with its reason.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "measure.hpp"
#include "planner/memory_model.hpp"
#include "runs.hpp"

namespace distlab::planner {
namespace {

TEST(Measure, EachRanksPeakIsReadFromItsOwnLine) {
  const std::string log =
      "[rank 1] [RANK 1]: memory: peak 48313612 bytes allocated on the CPU (the allocator meter, this rank's process)\n"
      "[rank 0] [RANK 0]: | epoch   1 |     1/    3 batches | lr 5.00 | ms/batch 70.00 | loss 9.00\n"
      "[rank 0] [RANK 0]: memory: peak 24299548 bytes allocated on the CPU (the allocator meter, this rank's process)\n"
      "[rank 7] [RANK 7]: memory: peak 5 bytes allocated on the CPU (a rank past the world, left out)\n";
  EXPECT_EQ(rank_bytes_from_log(log, 3), (std::vector<int64_t>{24299548, 48313612, -1}));
  EXPECT_EQ(rank_bytes_from_log("", 2), (std::vector<int64_t>{-1, -1}));
}

TEST(Measure, TheResidentPeakIsTheOnePrintedBesideTheMeters) {
  EXPECT_EQ(resident_bytes_from_log("[RANK 0]: memory: peak 82508124 bytes allocated on the CPU (the allocator meter, "
                                    "every rank of this process); resident peak 315449344 bytes\n"),
            315449344);
  EXPECT_EQ(resident_bytes_from_log("[RANK 0]: memory: peak 82508124 bytes allocated on the CPU\n"), -1);
}

// A real run on thread ranks: its resident peak holds its tensors and
// LibTorch's code, so it is above the meter's peak; and it is the child's
// own, not this test's (a parent's rusage would count the pages the child
// had from it before its exec).
TEST(Measure, AThreadRunsResidentPeakIsItsOwn) {
  MeasureOptions o;
  o.capstone = LESSON_11;
  o.warmup = 1;
  o.steps = 1;
  o.timeout_s = 240;
  const std::vector<char> ballast(size_t{600} << 20, 1);  // this process: 600 MB resident
  const Measured m = measure("lesson_11_capstone --preset tiny --pipeline 1 --replicas 2 --chunks 1", o);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_GT(m.peak_rss_bytes, m.metered_bytes);
  EXPECT_LT(m.peak_rss_bytes, int64_t{550} << 20) << "the parent's 600 MB counted";
  EXPECT_EQ(ballast[12345], 1);
}

MeasureOptions tiny_options() {
  MeasureOptions o;
  o.capstone = LESSON_11;
  o.launcher = DISTLAB_RUN;
  o.timeout_s = 240;
  return o;
}

TEST(Measure, EachRankOfALayoutMetersItsOwnProcess) {
  const RankPeaks peaks = measure_rank_memory(
      "lesson_11_capstone --preset tiny --pipeline 2 --replicas 1 --schedule 1f1b --stages-per-rank 1 --chunks 1", 2,
      tiny_options());
  ASSERT_TRUE(peaks.ok) << peaks.error;
  ASSERT_EQ(peaks.bytes.size(), 2u);
  EXPECT_GT(peaks.bytes[0], 0);
  // The last stage holds the decoder's logits over the vocabulary and
  // their gradient, more than the first stage's embedding and layers.
  EXPECT_GT(peaks.bytes[1], peaks.bytes[0]);
}

// Each rank's predicted peak (planner/memory_model.hpp) against its own
// process's allocator meter, within the 1 % target, on layouts of the tiny
// preset whose peaks come at different moments: the last stage's loss
// (GPipe holding two microbatches' log-probabilities), the first stage's
// embedding backward, ZeRO-1's flat buckets, ZeRO-3's whole .grad between
// two microbatches, ZeRO-2's backward that reduces (the embedding's summed
// .grad, its new gradient and the bucket it goes to), 16-bit weight copies, a zero-bubble schedule whose
// recomputed stages free a microbatch at I, and the corpus cut for two
// replicas at set-up.
TEST(Measure, EachRanksPeakIsItsPredictionWithinOnePercent) {
  const ModelShape model = model_on_corpus("tiny", 0, "");
  struct Case {
    train::Layout layout;  // P, R, T, C
    pipeline::ScheduleKind schedule;
    int microbatches, zero;
    memory::Recompute recompute;
    memory::Precision precision;
  };
  using K = pipeline::ScheduleKind;
  using memory::Precision;
  using memory::Recompute;
  for (const Case& k : {Case{{2, 1, 1, 1}, K::kGPipe, 2, 0, Recompute::kNone, Precision::kFp32},
                        Case{{2, 1, 1, 1}, K::k1F1B, 4, 0, Recompute::kNone, Precision::kBf16},
                        Case{{1, 2, 1, 1}, K::k1F1B, 1, 1, Recompute::kSelective, Precision::kFp32},
                        Case{{1, 2, 1, 1}, K::k1F1B, 2, 3, Recompute::kNone, Precision::kFp32},
                        Case{{2, 1, 1, 2}, K::kGPipe, 2, 2, Recompute::kNone, Precision::kFp32},
                        Case{{2, 1, 1, 1}, K::kZeroBubbleH1, 4, 0, Recompute::kFull, Precision::kFp32}}) {
    Choice c;
    c.layout = k.layout;
    c.pipeline.schedule = k.schedule;
    c.pipeline.microbatches = k.microbatches;
    c.data.zero = k.zero;
    c.memory.recompute = k.recompute;
    c.memory.precision = k.precision;
    const MemoryPrediction predicted = predict_memory(model, c);
    const int world = k.layout.world_size();
    const RankPeaks peaks = measure_rank_memory(capstone_command(model, c), world, tiny_options());
    ASSERT_TRUE(peaks.ok) << choice_name(c) << ": " << peaks.error;
    for (int r = 0; r < world; ++r) {
      const int64_t mine = predicted.ranks.at(static_cast<size_t>(train::place_of(r, k.layout).stage)).total();
      const double measured = double(peaks.bytes.at(static_cast<size_t>(r)));
      EXPECT_LE(std::abs(double(mine) - measured), 0.01 * measured)
          << choice_name(c) << ", rank " << r << ": predicted " << mine << " bytes, metered " << measured;
    }
  }
}

TEST(Measure, ALayoutTheLessonRefusesIsReportedWithItsReason) {
  const RankPeaks peaks = measure_rank_memory(
      "lesson_11_capstone --preset tiny --pipeline 2 --replicas 1 --schedule 1f1b --stages-per-rank 1 --chunks 0", 2,
      tiny_options());
  EXPECT_FALSE(peaks.ok);
  EXPECT_NE(peaks.error.find("chunks"), std::string::npos) << peaks.error;
}

}  // namespace
}  // namespace distlab::planner
