// Lesson 12 run as a user runs it, on thread ranks and as gloo processes
// under the launcher: it exits 0 (its own checks: equal to one process,
// memory strictly decreasing), and the numbers it prints are held to values
// worked out here from the model's size alone: Psi = layers x (w^2 + w)
// parameters on p ranks, fp32 Adam.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "run_program.hpp"

namespace {

using distlab::lessons::testing::lines_of;
using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::run;

struct Numbers {
  double params = 0, grads = 0, optimizer = 0, buffers = 0, states = 0, formula = 0;
};

// Part 2's rows: "  ZeRO-2    4.20  1.05  2.10  0.00  7.35 |  7.35  1.000" (MB).
std::map<std::string, Numbers> memory_rows(const std::string& output) {
  static const std::regex row(R"(^  (DDP|ZeRO-1|ZeRO-2|ZeRO-3|ZeRO-3 no prefetch) +([\d.]+) +([\d.]+) +([\d.]+) +)"
                              R"(([\d.]+) +([\d.]+) \| +([\d.]+) +[\d.]+$)");
  std::map<std::string, Numbers> rows;
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    rows[m[1]] = {std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), std::stod(m[5]), std::stod(m[6]),
                  std::stod(m[7])};
  }
  return rows;
}

// Part 3's rows: "  ZeRO-3     9.46 MB     9.46 MB    1.000   (3 Psi (p-1)/p)".
std::map<std::string, double> sent_rows(const std::string& output) {
  static const std::regex row(R"(^  (DDP|ZeRO-1|ZeRO-2|ZeRO-3|ZeRO-3 no prefetch) +([\d.]+) MB +[\d.]+ MB +[\d.]+ +\()");
  std::map<std::string, double> rows;
  for (const auto& line : lines_of(output)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) rows[m[1]] = std::stod(m[2]);
  }
  return rows;
}

void expect_lesson_12_right(const Outcome& r, int width, int layers, int p) {
  ASSERT_EQ(r.status, 0) << r.output;
  const double psi = static_cast<double>(layers) * (width * width + width);
  const double mb = 1e6, shard = psi / p;
  // What each stage should hold, in MB: (parameters, gradients, optimizer state, buffers). Buffers
  // -1: ZeRO-2's buckets and ZeRO-3's unit gradients, which come and go: at their most at least
  // one layer's gradient (a bucket holds whole layers, a unit is one) and at most all of them.
  const std::map<std::string, Numbers> expected = {
      {"DDP", {4 * psi / mb, 4 * psi / mb, 8 * psi / mb, 4 * psi / mb}},            // buffers: the buckets
      {"ZeRO-1", {4 * psi / mb, 4 * psi / mb, 8 * shard / mb, 0}},  // the reduced shard is a view of the whole
      {"ZeRO-2", {4 * psi / mb, 4 * shard / mb, 8 * shard / mb, -1}},
      {"ZeRO-3", {4 * shard / mb, 4 * shard / mb, 8 * shard / mb, -1}},
      {"ZeRO-3 no prefetch", {4 * shard / mb, 4 * shard / mb, 8 * shard / mb, -1}},
  };
  const auto rows = memory_rows(r.output);
  ASSERT_EQ(rows.size(), expected.size()) << r.output;
  constexpr double kPrinted = 0.011;  // two decimals, and shards of unequal size (at most a few elements)
  for (const auto& [stage, want] : expected) {
    const Numbers& got = rows.at(stage);
    EXPECT_NEAR(got.params, want.params, kPrinted) << stage;
    EXPECT_NEAR(got.grads, want.grads, kPrinted) << stage;
    EXPECT_NEAR(got.optimizer, want.optimizer, kPrinted) << stage;
    if (want.buffers >= 0) {
      EXPECT_NEAR(got.buffers, want.buffers, kPrinted) << stage;
    } else {
      EXPECT_GE(got.buffers, 4 * psi / layers / mb - kPrinted) << stage;
      EXPECT_LE(got.buffers, 4 * psi / mb + kPrinted) << stage;
    }
  }
  EXPECT_GT(rows.at("DDP").states, rows.at("ZeRO-1").states);
  EXPECT_GT(rows.at("ZeRO-1").states, rows.at("ZeRO-2").states);
  EXPECT_GT(rows.at("ZeRO-2").states, rows.at("ZeRO-3").states);
  // The bytes rank 0 sent: 2 Psi (p-1)/p elements of 4 bytes, ZeRO-3 3 Psi.
  const auto sent = sent_rows(r.output);
  ASSERT_EQ(sent.size(), expected.size()) << r.output;
  for (const auto& [stage, bytes] : sent)
    EXPECT_NEAR(bytes, (stage.rfind("ZeRO-3", 0) == 0 ? 3 : 2) * 4 * psi * (p - 1) / p / mb, kPrinted) << stage;
  // Every stage equal to one process.
  static const std::regex same(R"(^  (DDP|ZeRO-[123]|ZeRO-3 no prefetch) +largest difference (\S+)   OK$)");
  int equal = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_match(line, m, same)) continue;
    ++equal;
    EXPECT_LT(std::stod(m[2]), 1e-4) << line;
  }
  EXPECT_EQ(equal, 5) << r.output;
  // Part 6 read the overlap of both ZeRO-3 runs from the trace: 2 x units all-gathers + units reduce-scatters.
  static const std::regex overlap(R"(^  ZeRO-3( no prefetch)? +(\d+) collectives for)");
  int overlaps = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_search(line, m, overlap)) continue;
    ++overlaps;
    EXPECT_EQ(std::stoi(m[2]), 3 * layers) << line;
  }
  EXPECT_EQ(overlaps, 2) << r.output;
}

TEST(Lesson12, ZeroStagesHoldAndSendWhatTheAccountingSaysOnThreadRanks) {
  expect_lesson_12_right(
      run(std::string(LESSON_12) + " --backend threads --ranks 4 --width 256 --layers 3 --rows 4 --steps 1"), 256, 3,
      4);
}

TEST(Lesson12, UnderTheLauncherWithGloo) {
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 3 --master-port 0 --no-prefix -- " + LESSON_12 +
                        " --backend gloo --width 200 --layers 2 --rows 3 --steps 1");
  expect_lesson_12_right(r, 200, 2, 3);
  EXPECT_NE(r.output.find("gloo backend, 3 ranks"), std::string::npos) << r.output;
}

TEST(Lesson12, OneRankIsRefused) {
  const Outcome r = run(std::string(LESSON_12) + " --backend threads --ranks 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("needs at least 2 ranks"), std::string::npos) << r.output;
}

}  // namespace
