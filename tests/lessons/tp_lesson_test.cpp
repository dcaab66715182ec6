// Lesson 13 run as a user runs it, on thread ranks and as gloo processes
// under the launcher: it exits 0 (its own checks: every part equal to the
// unsplit module), and the numbers it prints are held to values worked out
// here from the flags alone: each rank's slices and parameter count, the
// bytes a ring all-reduce sends, the paper's activation formula and the
// float32 form of what the layer keeps (written out again here, term by
// term), which the allocator's measurement must equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <utility>

#include "run_program.hpp"

namespace {

using distlab::lessons::testing::lines_of;
using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::run;

struct Flags {
  int64_t s, b, h, a, f;
  double dropout;
  std::string text() const {
    return " --seq " + std::to_string(s) + " --batch " + std::to_string(b) + " --hidden " + std::to_string(h) +
           " --heads " + std::to_string(a) + " --ffn " + std::to_string(f) + " --dropout " + std::to_string(dropout);
  }
};

int64_t number(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  return std::stoll(text);
}

// Korthikanti et al. 2022, bytes per layer per rank (16-bit, 1-byte masks).
int64_t paper(const Flags& x, int t, bool sp) {
  const int64_t sbh = x.s * x.b * x.h, attention = 5 * x.a * x.s * x.s * x.b;
  return sp ? (34 * sbh + attention) / t : 10 * sbh + (24 * sbh + attention) / t;
}

// What the post-norm relu layer keeps, float32 (lib/tensor_parallel/memory.hpp's
// derivation): inside the region q, k, v, the mixed heads (4U), the softmax
// output (A) and relu's (F), with dropout also each dropout's noise and
// output; outside it norm1's input and output, norm2's input, the output
// (4U) and with dropout two noises (2U), and the norms' mean and 1/std
// (4sb); under sequence parallelism those on S/t rows, x not kept, and the
// two gathered inputs (2U) whole.
int64_t float32_form(const Flags& x, int t, bool sp) {
  const bool dropout = x.dropout > 0;
  const int64_t u = x.s * x.b * x.h, f = x.s * x.b * x.f, a = x.a * x.s * x.s * x.b;
  const int64_t inside = 4 * u + (dropout ? 3 : 1) * (f + a);
  int64_t outside = (dropout ? 6 : 4) * u + 4 * x.s * x.b;
  if (sp && t > 1) outside = (outside - u) / t + 2 * u;
  return 4 * (inside / t + outside);
}

// The parameters one rank of t holds: its rows of W_q, W_k, W_v and their
// biases, its columns of out_proj (bias whole), its rows of linear1, its
// columns of linear2 (bias whole), the two norms whole.
int64_t parameters_per_rank(const Flags& x, int t) {
  const int64_t e = x.h, f = x.f;
  return 3 * (e / t) * e + 3 * (e / t) + e * (e / t) + e + (f / t) * e + f / t + e * (f / t) + e + 4 * e;
}

// The ring all-reduce of n floats on t ranks: each rank sends 2 (t-1) chunks of n/t.
int64_t ring_bytes(int64_t n, int t) { return 2 * (t - 1) * (n / t) * 4; }

void expect_lesson_13_right(const Outcome& r, const Flags& x, int world) {
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  std::smatch m;
  const int64_t u = x.s * x.b * x.h;

  // Part 1: the pair's slices, the bytes of f and g, the differences.
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t rows = x.f / 2;
    const std::string held = "  rank " + std::to_string(rank) + ": linear1 rows " + std::to_string(rank * rows) + "-" +
                             std::to_string((rank + 1) * rows - 1) + ":";
    const auto line =
        std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(held, 0) == 0; });
    ASSERT_NE(line, lines.end()) << held << "\n" << r.output;
    EXPECT_NE(line->find("weight (" + std::to_string(rows) + ", " + std::to_string(x.h) + "), bias (" +
                         std::to_string(rows) + ")"),
              std::string::npos)
        << *line;
    EXPECT_NE((line + 1)->find("weight (" + std::to_string(x.h) + ", " + std::to_string(rows) + "), bias (" +
                               std::to_string(x.h) + ") whole"),
              std::string::npos)
        << *(line + 1);
  }
  EXPECT_NE(r.output.find("rows and columns of the unsplit weights: yes"), std::string::npos) << r.output;
  static const std::regex f_forward(R"(^    forward   f = identity, into linear1 +([\d,]+) bytes$)");
  static const std::regex g_forward(R"(^              g = all-reduce of linear2's partial sums +([\d,]+) bytes$)");
  static const std::regex backward(R"(^    backward  g = identity, f = all-reduce of dL/dx +([\d,]+) bytes$)");
  static const std::regex mlp(R"(output (\S+),$)"), mlp_grads(R"(^  dL/dx (\S+), weight gradients (\S+)   OK$)");
  int found = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (std::regex_match(lines[i], m, f_forward)) {
      ++found;
      EXPECT_EQ(number(m[1]), 0) << lines[i];
    }
    if (std::regex_match(lines[i], m, g_forward)) {
      ++found;
      EXPECT_EQ(number(m[1]), ring_bytes(u, 2)) << lines[i];
    }
    if (std::regex_match(lines[i], m, backward)) {
      ++found;
      EXPECT_EQ(number(m[1]), ring_bytes(u, 2)) << lines[i];
    }
    if (std::regex_search(lines[i], m, mlp) && lines[i].find("against the unsplit MLP") != std::string::npos) {
      found += 1;
      EXPECT_LT(std::stod(m[1]), 1e-5) << lines[i];
      ASSERT_TRUE(i + 1 < lines.size() && std::regex_match(lines[i + 1], m, mlp_grads)) << r.output;
      EXPECT_LT(std::stod(m[1]), 1e-5) << lines[i + 1];
      EXPECT_LT(std::stod(m[2]), 1e-5) << lines[i + 1];
    }
  }
  EXPECT_EQ(found, 4) << r.output;

  // The tensor sizes the world allows (the flags here split for all of them).
  std::vector<std::pair<int, bool>> expected;
  for (int t = 1; t <= world; t *= 2) {
    expected.push_back({t, false});
    if (t > 1) expected.push_back({t, true});
  }
  auto key = [](int t, const std::string& region) { return std::make_pair(t, region == "tensor+seq"); };

  // Part 2: every row's differences, and each rank's parameter count.
  static const std::regex layer_row(R"(^ +(\d+)  (unsplit|tensor|tensor\+seq) +(\S+) +(\S+) +(\S+) +([\d,]+)$)");
  std::vector<std::pair<int, bool>> layers;
  for (const auto& line : lines) {
    if (!std::regex_match(line, m, layer_row)) continue;
    const int t = std::stoi(m[1]);
    layers.push_back(key(t, m[2]));
    for (int c = 3; c <= 5; ++c) EXPECT_LT(std::stod(m[c]), 1e-5) << line;
    EXPECT_EQ(number(m[6]), parameters_per_rank(x, t)) << line;
  }
  EXPECT_EQ(layers, expected) << r.output;
  EXPECT_NE(r.output.find("the largest differences over every rank   OK"), std::string::npos) << r.output;

  // Part 3: bytes from the trace and counted, activations measured and by
  // the float32 form, the paper's formula.
  static const std::regex step_row(
      R"(^ +(\d+)  (unsplit|tensor|tensor\+seq) +([\d,]+) +([\d,]+) +([\d,]+) +([\d,]+) +([\d,]+)$)");
  std::vector<std::pair<int, bool>> steps;
  for (const auto& line : lines) {
    if (!std::regex_match(line, m, step_row)) continue;
    const int t = std::stoi(m[1]);
    const bool sp = m[2] == "tensor+seq";
    steps.push_back({t, sp});
    const int64_t sent = 4 * ring_bytes(u, t);  // 4 all-reduces of sbh floats per layer per step
    EXPECT_EQ(number(m[3]), sent) << line;
    EXPECT_EQ(number(m[4]), sent) << line;
    EXPECT_EQ(number(m[5]), float32_form(x, t, sp)) << line;
    EXPECT_EQ(number(m[6]), float32_form(x, t, sp)) << line;
    EXPECT_EQ(number(m[7]), paper(x, t, sp)) << line;
  }
  EXPECT_EQ(steps, expected) << r.output;
  // Sequence parallelism's extra all-reduce: 6 replicated vectors of h floats.
  std::map<int, int64_t> sync;
  static const std::regex sync_line(R"(^    after backward: (.*) bytes \(trace\)$)"), sync_item(R"(t=(\d+) ([\d,]+))");
  for (const auto& line : lines) {
    if (!std::regex_match(line, m, sync_line)) continue;
    const std::string items = m[1];
    for (std::sregex_iterator i(items.begin(), items.end(), sync_item), end; i != end; ++i)
      sync[std::stoi((*i)[1])] = number((*i)[2]);
  }
  std::map<int, int64_t> expected_sync;
  for (int t = 2; t <= world; t *= 2) expected_sync[t] = 6 * ring_bytes(x.h, t);
  EXPECT_EQ(sync, expected_sync) << r.output;
}

TEST(Lesson13, ThreadRanksPrintWhatTheFormulasGive) {
  const Flags x{32, 4, 64, 4, 128, 0.2};
  const Outcome r = run(std::string(LESSON_13) + " --backend threads --ranks 4" + x.text());
  expect_lesson_13_right(r, x, 4);
  EXPECT_NE(r.output.find("rank 0's forward ran while the others kept nothing"), std::string::npos) << r.output;
}

TEST(Lesson13, WithoutDropoutTheMasksAreGone) {
  const Flags x{16, 2, 32, 2, 64, 0.0};
  expect_lesson_13_right(run(std::string(LESSON_13) + " --backend threads --ranks 2" + x.text()), x, 2);
}

TEST(Lesson13, UnderTheLauncherWithGloo) {
  const Flags x{24, 3, 48, 4, 96, 0.1};
  const Outcome r = run(std::string(DISTLAB_RUN) + " --nproc-per-node 2 --master-port 0 --no-prefix -- " + LESSON_13 +
                        " --backend gloo" + x.text());
  expect_lesson_13_right(r, x, 2);
  EXPECT_NE(r.output.find("(gloo backend, 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("every rank measured what rank 0 did: yes"), std::string::npos) << r.output;
}

// A tensor size the layer's flags do not split is refused, naming the flag:
// run with it left out, the lesson would pass with part of what was asked
// (t up to the world's size) never run.
TEST(Lesson13, TensorSizesTheLayerDoesNotSplitAreRefusedWithTheReason) {
  const Outcome r = run(std::string(LESSON_13) + " --backend threads --ranks 4 --seq 6 --batch 2 --hidden 16 "
                                                 "--heads 4 --ffn 32");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("lesson 13 cuts the layer over t = 1, 2, 4 on 4 ranks, but --seq 6 does not split among "
                          "t=4: give sizes every t divides, or fewer ranks"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("tensor+seq"), std::string::npos) << "a part ran before the refusal\n" << r.output;
}

TEST(Lesson13, OneRankAndHeadsThatDoNotDivideAreRefused) {
  Outcome r = run(std::string(LESSON_13) + " --backend threads --ranks 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("needs at least 2 ranks"), std::string::npos) << r.output;
  r = run(std::string(LESSON_13) + " --backend threads --ranks 2 --hidden 30 --heads 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--heads 4 does not divide --hidden 30"), std::string::npos) << r.output;
}

}  // namespace
