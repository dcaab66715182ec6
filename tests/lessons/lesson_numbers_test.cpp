// Lessons 15, 16 and 17 run as a user runs them, and the numbers they print
// held to values worked out here, each by its formula written again in the
// test (not read back from the library the lessons call), so that a slip in
// a lesson's arithmetic or in its words about a number fails:
//   lesson 15's merge of two blocks: one row's lse, the merged lse and block
//     b's weight from the lesson's own tensors drawn again here in double,
//     and the rows where log(1 + exp) overflows; the ring's time against the
//     work spread evenly, from pairs counted here position by position; a
//     block's FLOPs and a hop's bytes;
//   lesson 16's experts per rank and bytes per step for one model (E fixed)
//     on different numbers of ranks; the closed form 4 T k (G-1)/G d floats
//     against the traced rows (equal when every token picks every expert);
//     the experts' FLOPs against the bytes;
//   lesson 17's model FLOPs per token and its MFU over both peaks it states;
//     one timing of each row, read by parts 2, 3 and 4 alike; the step's
//     peak against what it must hold; the loss scaler's steps replayed.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "run_program.hpp"

namespace {

using distlab::lessons::testing::lines_of;
using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::run;

// The first line matching `pattern` (whole line), its groups; fails the test when none does.
std::smatch line_matching(const std::vector<std::string>& lines, const std::string& pattern) {
  const std::regex re(pattern);
  std::smatch m;
  for (const std::string& line : lines)
    if (std::regex_match(line, m, re)) return m;
  ADD_FAILURE() << "no line matches " << pattern;
  return m;
}

// ------------------------------------------------------------------ lesson 15

// The lesson's q or k, drawn as it draws them (its own generator per seed), in double.
at::Tensor drawn(int64_t batch, int64_t heads, int64_t seq, int64_t dim, uint64_t seed) {
  return at::randn({batch, heads, seq, dim}, at::detail::createCPUGenerator(seed)).to(at::kDouble);
}

struct Blocks {
  at::Tensor lse_a, lse_b;  // (B, H, S): each half of the keys' log-sum-exp
};

// Part 1's two blocks: the keys cut in half, scores q k^T / sqrt(D), q scaled by `gain`.
Blocks blocks_of(int64_t batch, int64_t heads, int64_t seq, int64_t dim, double gain) {
  const at::Tensor q = drawn(batch, heads, seq, dim, 1) * gain, k = drawn(batch, heads, seq, dim, 2);
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(dim));
  const int64_t half = seq / 2;
  return {at::logsumexp(scores.narrow(-1, 0, half), -1), at::logsumexp(scores.narrow(-1, half, seq - half), -1)};
}

TEST(Lesson15, OneRowsMergeAndTheOverflowAreTheFormulas) {
  const Outcome r = run(std::string(LESSON_15) + " --backend threads --ranks 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  const int64_t B = 2, H = 8, S = 64, D = 16;  // the lesson's defaults

  // Query 0 of head 0 at ordinary logits: a the first half, b the second.
  const Blocks plain = blocks_of(B, H, S, D, 1.0);
  const double lse_a = plain.lse_a.index({0, 0, 0}).item<double>(), lse_b = plain.lse_b.index({0, 0, 0}).item<double>();
  const double m = std::max(lse_a, lse_b);
  const double lse_ab = m + std::log(std::exp(lse_a - m) + std::exp(lse_b - m));
  const double weight = std::exp(lse_b - lse_ab);
  // The same weight by the total before the merge; by the total after it, a different number.
  EXPECT_NEAR(weight, 1 / (1 + std::exp(lse_a - lse_b)), 1e-12);
  EXPECT_GT(std::abs(weight - 1 / (1 + std::exp(lse_ab - lse_b))), 0.1);

  const double printed = 5e-5 + 1e-5;  // 4 decimals, and float32's lse against double's
  std::smatch got = line_matching(
      lines, R"(  query 0 of head 0: lse_a = (\S+), lse_b = (\S+), m = max\(lse_a, lse_b\) = (\S+))");
  EXPECT_NEAR(std::stod(got[1]), lse_a, printed);
  EXPECT_NEAR(std::stod(got[2]), lse_b, printed);
  EXPECT_NEAR(std::stod(got[3]), m, printed);
  got = line_matching(lines, R"(    lse_ab = m \+ log\(exp\(lse_a - m\) \+ exp\(lse_b - m\)\) = (\S+))");
  EXPECT_NEAR(std::stod(got[1]), lse_ab, printed);
  got = line_matching(lines, R"(    block b's weight exp\(lse_b - lse_ab\) = sigmoid\(lse_b - lse_a\) = (\S+))");
  EXPECT_NEAR(std::stod(got[1]), weight, printed);

  // q x 40: the largest lse, the largest lse_b - lse_a, the rows where exp of it passes float32's largest.
  const Blocks scaled = blocks_of(B, H, S, D, 40.0);
  const at::Tensor d = scaled.lse_b - scaled.lse_a;
  const double overflow = std::log(double(std::numeric_limits<float>::max()));
  const int64_t past = (d > overflow).sum().item<int64_t>();
  const double widest = d.max().item<double>();
  const double biggest = std::max(scaled.lse_a.max().item<double>(), scaled.lse_b.max().item<double>());
  ASSERT_GT(past, 0) << "the default flags no longer show the overflow";
  got = line_matching(lines,
                      R"(  q x 40: lse up to (\d+), which float32 holds to about \S+ \(1e-5 x (\d+) allowed\);)");
  EXPECT_NEAR(std::stod(got[1]), biggest, 0.5 + 1e-4);
  got = line_matching(lines,
                      R"(  lse_b - lse_a reaches (\S+) and float32's exp overflows past 88\.7: log\(1 \+ exp\), the)");
  EXPECT_NEAR(std::stod(got[1]), widest, 0.05 + 1e-4);
  got = line_matching(lines,
                      R"(  ring's first merge, gives lse_ab = inf and out_ab = 0 in the (\d+) rows? past it\. .*)");
  EXPECT_EQ(std::stoll(got[1]), past);

  // Each merge's row of the table: max-subtracted and sigmoid within float32's
  // rounding of the whole softmax at both scales; log(1 + exp) too at q x 1, and
  // inf in exactly the rows past the overflow at q x 40.
  const std::string number = R"((\d\.\d\de[-+]\d\d|\d+ rows? inf))";
  for (const std::string name : {"max-subtracted", R"(log\(1 \+ exp\))", "sigmoid"}) {
    got = line_matching(lines, "    " + name + R"( +lse_ab = .*\S +)" + number + " +" + number);
    const std::string at_1 = got[1], at_40 = got[2];
    ASSERT_EQ(at_1.find("inf"), std::string::npos) << name << ": " << at_1;
    EXPECT_LE(std::stod(at_1), 1e-5) << name;
    if (name == "max-subtracted" || name == "sigmoid") {
      ASSERT_EQ(at_40.find("inf"), std::string::npos) << name << ": " << at_40;
      EXPECT_LE(std::stod(at_40), 1e-5 * biggest) << name;
    } else {
      EXPECT_EQ(at_40, std::to_string(past) + (past == 1 ? " row inf" : " rows inf"));
    }
  }
}

// Causal pairs (query, key) rank r computes at ring step s: its queries'
// positions against those of the keys it holds then (rank r - s's), counted
// one by one. Contiguous: rank r holds [r L, (r+1) L); zigzag: chunks r and
// 2C-1-r of S/2C.
std::vector<int64_t> positions_held(bool zigzag, int64_t S, int C, int r) {
  std::vector<int64_t> p;
  if (!zigzag) {
    for (int64_t i = r * S / C; i < (r + 1) * S / C; ++i) p.push_back(i);
    return p;
  }
  const int64_t c = S / (2 * C);
  for (const int64_t chunk : {int64_t(r), int64_t(2 * C - 1 - r)})
    for (int64_t i = chunk * c; i < (chunk + 1) * c; ++i) p.push_back(i);
  return p;
}

int64_t causal_pairs(const std::vector<int64_t>& q, const std::vector<int64_t>& k) {
  int64_t n = 0;
  for (const int64_t a : q)
    for (const int64_t b : k) n += b <= a ? 1 : 0;
  return n;
}

// The ring's time in pairs: every step waits for its busiest rank.
int64_t naive_ring_time(bool zigzag, int64_t S, int C) {
  int64_t ring = 0;
  for (int s = 0; s < C; ++s) {
    int64_t busiest = 0;
    for (int q = 0; q < C; ++q)
      busiest = std::max(busiest, causal_pairs(positions_held(zigzag, S, C, q), positions_held(zigzag, S, C, (q - s + C) % C)));
    ring += busiest;
  }
  return ring;
}

void expect_ring_times_right(int C, int64_t S) {
  const Outcome r = run(std::string(LESSON_15) + " --backend threads --ranks " + std::to_string(C) + " --seq " +
                        std::to_string(S));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  const std::regex time_line(R"(    ring time (\d+) \(busiest rank per step\), even (\d+): (\S+)% efficient)");
  std::vector<std::smatch> printed;
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_match(line, m, time_line)) printed.push_back(m);
  }
  ASSERT_EQ(printed.size(), 2u) << r.output;  // contiguous, then zigzag
  for (int z = 0; z < 2; ++z) {
    const int64_t ring = naive_ring_time(z, S, C);
    const double balanced = double(S) * double(S + 1) / 2 / C;  // every causal pair, spread evenly
    EXPECT_EQ(std::stoll(printed[z][1]), ring) << (z ? "zigzag" : "contiguous");
    EXPECT_NEAR(std::stod(printed[z][2]), balanced, 0.5);
    EXPECT_NEAR(std::stod(printed[z][3]), 100 * balanced / double(ring), 0.05 + 1e-9);
  }
  // As the chunks grow the contiguous ring's busiest rank does C - 1 full
  // blocks and a half one a step each: (C L^2 / 2) / ((C - 1/2) L^2).
  const std::smatch limit = line_matching(lines, R"(    \(C/\(2C-1\) = (\S+)% as the chunks grow\); .*)");
  EXPECT_NEAR(std::stod(limit[1]), 100.0 * C / (2 * C - 1), 0.05 + 1e-9);
  // The same sequence's contiguous ring on 2, 4, 8 and 16 ranks (the deck's
  // "on 8?"), counted pair by pair here, and the limits beside them.
  const std::smatch more = line_matching(
      lines, R"(    the same (\d+) tokens on more ranks, counted by the ring plan: 2: (\S+)%, 4: (\S+)%, 8: (\S+)%, 16: (\S+)%)");
  EXPECT_EQ(std::stoll(more[1]), S);
  const std::smatch limits = line_matching(lines, R"(    \(C/\(2C-1\): (\S+)%, (\S+)%, (\S+)%, (\S+)%\))");
  for (int i = 0; i < 4; ++i) {
    const int ranks = 2 << i;
    const double even = double(S) * double(S + 1) / 2 / ranks;
    EXPECT_NEAR(std::stod(more[2 + i]), 100 * even / double(naive_ring_time(false, S, ranks)), 0.05 + 1e-9) << ranks;
    EXPECT_NEAR(std::stod(limits[1 + i]), 100.0 * ranks / (2 * ranks - 1), 0.05 + 1e-9) << ranks;
  }
}

TEST(Lesson15, RingTimeAgainstTheWorkSpreadEvenly) {
  expect_ring_times_right(4, 64);   // 904 against 520, 57.5 %
  expect_ring_times_right(8, 128);  // the imbalance grows with C
}

TEST(Lesson15, ABlocksFlopsAndAHopsBytes) {
  const Outcome r = run(std::string(LESSON_15) + " --backend threads --ranks 2 --seq 48 --heads 4 --head-dim 8");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  const int64_t B = 2, H = 4, S = 48, D = 8, C = 2, L = S / C;
  std::smatch got = line_matching(
      lines, R"(  4 B H L\^2 D = (\d+) FLOPs; the hop bringing the next moves K, V: 2 B H L D x 4 = (\d+) bytes\.)");
  EXPECT_EQ(std::stoll(got[1]), 4 * B * H * L * L * D);
  EXPECT_EQ(std::stoll(got[2]), 2 * B * H * L * D * 4);
  got = line_matching(lines, R"(  L/2 = (\d+) FLOPs a byte: .*)");
  EXPECT_EQ(std::stoll(got[1]), L / 2);
}

// ------------------------------------------------------------------ lesson 16

std::vector<int64_t> numbers_in(const std::string& text) {
  std::vector<int64_t> out;
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator i(text.begin(), text.end(), number), end; i != end; ++i)
    out.push_back(std::stoll(i->str()));
  return out;
}

int64_t sum_of(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t total = 0;
  for (size_t i = from; i < v.size(); ++i) total += v[i];
  return total;
}

// Part 3's row for a group of G ranks: rank 0's rows sent to and received from each rank of its group.
struct GroupRow {
  int G = 0;
  int64_t per_rank = 0;
  std::vector<int64_t> sent, received;
  double difference = 0;
};

// Lesson 16 on `ranks` thread ranks with `flags`: one model of `experts`
// experts (d = 16, the default) on every group size that divides the ranks,
// and part 4's bytes worked out again from part 3's own counts.
std::vector<GroupRow> expect_lesson_16_right(int ranks, int64_t experts, const std::string& flags, int64_t k = 2) {
  const Outcome r = run(std::string(LESSON_16) + " --backend threads --ranks " + std::to_string(ranks) + flags);
  EXPECT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  const int64_t d = 16;
  line_matching(lines, "3\\. Expert parallelism: one model, " + std::to_string(experts) + " experts, .*, on G ranks");
  std::vector<GroupRow> rows;
  const std::regex row(R"(^ +(\d+) +(\d+)   ([\d ]+?) {2,}([\d ]+?) {2,}(\S+)$)");
  std::smatch m;
  for (const std::string& line : lines)
    if (std::regex_match(line, m, row))
      rows.push_back({std::stoi(m[1]), std::stoll(m[2]), numbers_in(m[3]), numbers_in(m[4]), std::stod(m[5])});
  // Every group size that divides the ranks, the experts E / G a rank, each rank of the group sent to.
  std::vector<int> sizes;
  for (int G = 1; G <= ranks; ++G)
    if (ranks % G == 0) sizes.push_back(G);
  EXPECT_EQ(rows.size(), sizes.size()) << r.output;
  if (rows.size() != sizes.size()) return rows;
  const GroupRow& widest = rows.back();
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].G, sizes[i]);
    EXPECT_EQ(rows[i].per_rank, experts / sizes[i]);
    EXPECT_EQ(rows[i].sent.size(), size_t(sizes[i]));
    EXPECT_EQ(rows[i].received.size(), size_t(sizes[i]));
    EXPECT_LT(rows[i].difference, 1e-4);
    // One model: rank 0 routes its tokens alike whatever G, so what it sends
    // rank q of a group of G is what it sends ranks q W/G .. (q+1) W/G - 1
    // of the widest group (their experts are rank q's).
    const size_t span = size_t(ranks / sizes[i]);
    for (size_t q = 0; q < rows[i].sent.size(); ++q) {
      int64_t want = 0;
      for (size_t j = q * span; j < (q + 1) * span && j < widest.sent.size(); ++j) want += widest.sent[j];
      EXPECT_EQ(rows[i].sent[q], want) << "G " << sizes[i] << ", rank " << q;
    }
  }
  // Alone, a rank sends and receives its own rows, nothing else, and computes what every expert on it does.
  EXPECT_EQ(rows.front().sent, rows.front().received);
  EXPECT_EQ(rows.front().difference, 0.0);

  // Part 4 on the group of every rank: dispatched = rows to the other ranks,
  // returned = rows from them; counts (G-1) E/G int64; rows 2 (dispatched + returned) d float32.
  const int64_t dispatched = sum_of(widest.sent, 1), returned = sum_of(widest.received, 1);
  std::smatch got = line_matching(lines, "  dispatched: the rows rank 0 sends to the other ranks' experts = (.*)");
  EXPECT_EQ(numbers_in(got[1]).back(), dispatched) << got[0];
  got = line_matching(lines, "  returned: the rows the other ranks sent rank 0's experts, sent back = (.*)");
  EXPECT_EQ(numbers_in(got[1]).back(), returned) << got[0];
  const int64_t counts = (ranks - 1) * (experts / ranks) * 8, bytes = 2 * (dispatched + returned) * d * 4;
  got = line_matching(lines, R"(  counts  \(G-1\) x E/G x 8 = (\d+) x (\d+) x 8 = (\d+))");
  EXPECT_EQ(std::stoll(got[1]), ranks - 1);
  EXPECT_EQ(std::stoll(got[2]), experts / ranks);
  EXPECT_EQ(std::stoll(got[3]), counts);
  got = line_matching(
      lines, R"(  rows    2 x \(dispatched \+ returned\) x d x 4 = 2 x \((\d+) \+ (\d+)\) x (\d+) x 4 = (\d+))");
  EXPECT_EQ(std::stoll(got[1]), dispatched);
  EXPECT_EQ(std::stoll(got[2]), returned);
  EXPECT_EQ(std::stoll(got[3]), d);
  EXPECT_EQ(std::stoll(got[4]), bytes);
  got = line_matching(lines, R"(  formula (\d+), traced (\d+))");
  EXPECT_EQ(std::stoll(got[1]), counts + bytes);
  EXPECT_EQ(std::stoll(got[2]), counts + bytes);

  // The closed form: T k (G-1)/G rows dispatched and as many returned, each
  // twice (forward and backward), d float32 each; beside the traced rows.
  const int64_t T = 64, h = 32, G = ranks;
  const double closed = 4.0 * T * k * (G - 1) / G * d * 4;
  got = line_matching(lines, R"(    = 4 x (\d+) x (\d+) x (\d+)/(\d+) x (\d+) x 4 = (\d+) bytes; )"
                             R"(traced, less the counts, (\d+) \((\S+)x\))");
  EXPECT_EQ(std::stoll(got[1]), T);
  EXPECT_EQ(std::stoll(got[2]), k);
  EXPECT_EQ(std::stoll(got[3]), G - 1);
  EXPECT_EQ(std::stoll(got[4]), G);
  EXPECT_NEAR(std::stod(got[6]), closed, 0.5);
  EXPECT_EQ(std::stoll(got[7]), bytes);
  EXPECT_NEAR(std::stod(got[8]), double(bytes) / closed, 0.005 + 1e-9);
  // The experts' work: 12 d h FLOPs for every row rank 0's experts ran (its own included).
  const int64_t computed = sum_of(widest.received), flops = 12 * d * h * computed;
  got = line_matching(lines,
                      R"(    rank 0's experts ran (\d+) rows, (\d+) FLOPs, for (\d+) bytes sent: (\S+) bytes a FLOP;)");
  EXPECT_EQ(std::stoll(got[1]), computed);
  EXPECT_EQ(std::stoll(got[2]), flops);
  EXPECT_EQ(std::stoll(got[3]), counts + bytes);
  EXPECT_NEAR(std::stod(got[4]), double(counts + bytes) / double(flops), 5e-4 + 1e-9);
  got = line_matching(lines, R"(    in the closed form 4 \(G-1\) / \(3 G h\) = (\S+): .*)");
  EXPECT_NEAR(std::stod(got[1]), 4.0 * (G - 1) / (3.0 * G * h), 5e-4 + 1e-9);
  return rows;
}

TEST(Lesson16, OneModelOnEveryGroupSizeAndItsBytes) {
  // The same 8 experts on 2 and on 4 ranks: rank 0's tokens and routing are
  // the same, so its rows per expert are too.
  const std::vector<GroupRow> two = expect_lesson_16_right(2, 8, "");
  const std::vector<GroupRow> four = expect_lesson_16_right(4, 8, "");
  ASSERT_FALSE(two.empty());
  ASSERT_FALSE(four.empty());
  EXPECT_EQ(two.front().sent, four.front().sent);
  EXPECT_EQ(two.back().sent, four[1].sent);  // G = 2 on either
  // 64 tokens, top-2: every choice kept dropless; with capacity 16 a rank (ceil(64 x 2 x 1 / 8)), some dropped.
  EXPECT_LT(sum_of(two.front().sent), 128);
  const std::vector<GroupRow> dropless = expect_lesson_16_right(2, 8, " --dropless");
  ASSERT_FALSE(dropless.empty());
  EXPECT_EQ(sum_of(dropless.front().sent), 128);
  // --capacity-factor 0, still accepted, is the same run.
  const std::vector<GroupRow> zero = expect_lesson_16_right(2, 8, " --capacity-factor 0");
  ASSERT_FALSE(zero.empty());
  EXPECT_EQ(zero.back().sent, dropless.back().sent);
  EXPECT_EQ(zero.back().received, dropless.back().received);
}

TEST(Lesson16, ClosedFormBytesAreTheTracedOnesWhenEveryTokenPicksEveryExpert) {
  // 4 experts, top-4, dropless: every token sends a row to every expert, so
  // the rows spread exactly evenly and the closed form is what the trace
  // counts, row for row.
  for (const int ranks : {2, 4}) {
    const Outcome r = run(std::string(LESSON_16) + " --backend threads --ranks " + std::to_string(ranks) +
                          " --experts 4 --top-k 4 --dropless");
    ASSERT_EQ(r.status, 0) << r.output;
    const int64_t T = 64, k = 4, d = 16, G = ranks;
    const int64_t closed = 4 * T * k * (G - 1) / G * d * 4;
    const std::smatch got = line_matching(
        lines_of(r.output),
        R"(    = 4 x \d+ x \d+ x \d+/\d+ x \d+ x 4 = (\d+) bytes; traced, less the counts, (\d+) \((\S+)x\))");
    EXPECT_EQ(std::stoll(got[1]), closed);
    EXPECT_EQ(std::stoll(got[2]), closed);
    EXPECT_EQ(got[3].str(), "1.00");
    expect_lesson_16_right(ranks, 4, " --experts 4 --top-k 4 --dropless", 4);
  }
}

TEST(Lesson16, ExpertsTheRanksDoNotDivideAreRefused) {
  Outcome r = run(std::string(LESSON_16) + " --backend threads --ranks 3");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("lesson 16: --experts 8 do not spread over 3 ranks: give --experts a multiple of 3, or "
                          "ranks that divide 8"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("1. Routing by hand"), std::string::npos) << "a part ran before the refusal\n" << r.output;
  r = run(std::string(LESSON_16) + " --dropless --capacity-factor 1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--capacity-factor excludes --dropless"), std::string::npos) << r.output;
  // 6 experts on 3 ranks: 6, 2 a rank.
  expect_lesson_16_right(3, 6, " --experts 6");
}

// ------------------------------------------------------------------ lesson 17

// This CPU's nominal peak in FLOP/s, float32 and bf16, as the lesson says it
// works it out: the cores the threads can use x "cpu MHz" x the FLOPs a cycle
// of two FMA units on the widest vector the flags list (bf16: twice with
// avx512_bf16, 1024 with AMX, else float32's). {0, 0} when /proc/cpuinfo does
// not say.
// The range a / b can take when a and b are numbers printed rounded to the
// digits they show (half a unit of the last digit either way).
std::pair<double, double> ratio_bounds(const std::string& a, const std::string& b) {
  auto half_unit = [](const std::string& t) {
    const size_t dot = t.find('.');
    const int digits = dot == std::string::npos ? 0 : static_cast<int>(t.size() - dot - 1);
    return 0.5 * std::pow(10.0, -digits);
  };
  const double x = std::stod(a), y = std::stod(b), ex = half_unit(a), ey = half_unit(b);
  return {(x - ex) / (y + ey), (x + ex) / std::max(y - ey, 1e-300)};
}

std::pair<double, double> cpu_nominal_peak(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> cores;
  std::string line, physical = "0", flags;
  double mhz = 0;
  const std::regex field(R"(^([^:]*?)\s*: ?(.*)$)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_match(line, m, field)) continue;
    if (m[1] == "physical id") physical = m[2];
    if (m[1] == "core id") cores.insert(physical + "/" + m[2].str());
    if (m[1] == "cpu MHz" && mhz == 0) mhz = std::stod(m[2]);
    if (m[1] == "flags" && flags.empty()) flags = " " + m[2].str() + " ";
  }
  auto has = [&](const std::string& f) { return flags.find(" " + f + " ") != std::string::npos; };
  const double lanes = has("avx512f") ? 16 : has("avx2") && has("fma") ? 8 : 0;
  if (lanes == 0 || mhz == 0) return {0, 0};
  const double fp32_cycle = 2 /* FMA units */ * lanes * 2 /* FLOPs an FMA */;
  const double bf16_cycle = has("amx_bf16") ? 1024 : has("avx512_bf16") ? 2 * fp32_cycle : fp32_cycle;
  const double hz = std::min<double>(threads, std::max<size_t>(1, cores.size())) * mhz * 1e6;
  return {hz * fp32_cycle, hz * bf16_cycle};
}

struct MemoryFlags {
  int64_t layers, seq, batch, hidden, heads, ffn;
  std::string text() const {
    return " --layers " + std::to_string(layers) + " --seq " + std::to_string(seq) + " --batch " +
           std::to_string(batch) + " --hidden " + std::to_string(hidden) + " --heads " + std::to_string(heads) +
           " --ffn " + std::to_string(ffn) + " --repeats 1";
  }
};

// Part 4 of lesson 17: the FLOPs a token, both peaks, and each row's MFU and
// HFU over each peak, from the row's own tokens/s and the peaks printed.
void expect_lesson_17_mfu_right(const MemoryFlags& x, const std::string& more, double nominal32, double nominal16) {
  const Outcome r = run(std::string(LESSON_17) + x.text() + more);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  // The weights that multiply: per layer q, k, v and the output projection
  // (4 d^2) and the feed-forward's two (2 d f); a token costs 6 N + 12 L s d.
  const int64_t d = x.hidden, L = x.layers, s = x.seq;
  const int64_t N = L * (4 * d * d + 2 * d * x.ffn), model = 6 * N + 12 * L * s * d;
  std::smatch got = line_matching(
      lines, R"(   a token costs 6N \+ 12Lsd = ([\d,]+) FLOPs \(N = ([\d,]+): the weights that multiply\))");
  auto plain = [](std::string t) {
    t.erase(std::remove(t.begin(), t.end(), ','), t.end());
    return std::stoll(t);
  };
  EXPECT_EQ(plain(got[1]), model);
  EXPECT_EQ(plain(got[2]), N);
  // Recomputation's products again, per token: full a second forward of every
  // layer (2 N + 4 L s d), selective the attention core's two (4 L s d).
  const std::map<std::string, int64_t> hardware = {{"none", model},
                                                    {"full", model + 2 * N + 4 * L * s * d},
                                                    {"selective", model + 4 * L * s * d},
                                                    {"matmuls", model}};

  got = line_matching(lines,
                      R"(   achievable, measured: n x n matmul .* +fp32 +(\S+) GFLOP/s  bf16 +(\S+) GFLOP/s)");
  const double measured32 = std::stod(got[1]) * 1e9, measured16 = std::stod(got[2]) * 1e9;
  got = line_matching(lines, R"(   hardware: (.*?) +fp32 +(\S+) GFLOP/s  bf16 +(\S+) GFLOP/s)");
  ASSERT_GT(nominal32, 0);
  EXPECT_NEAR(std::stod(got[2]) * 1e9, nominal32, 5e-4 * nominal32) << got[0];
  EXPECT_NEAR(std::stod(got[3]) * 1e9, nominal16, 5e-4 * nominal16) << got[0];

  const std::regex row(
      R"(^   (none|full|selective|matmuls) +(fp32|bf16) +\S+ +(\d+) +(\S+)% +(\S+)% +(\S+)% +(\S+)%$)");
  std::smatch m;
  int rows = 0;
  for (const std::string& line : lines) {
    if (!std::regex_match(line, m, row)) continue;
    ++rows;
    const bool fp32 = m[2] == "fp32";
    const double per_second = std::stod(m[3]);
    const double peaks[] = {fp32 ? measured32 : measured16, fp32 ? nominal32 : nominal16};
    for (int p = 0; p < 2; ++p) {
      const double mfu = 100 * per_second * double(model) / peaks[p];
      const double hfu = 100 * per_second * double(hardware.at(m[1])) / peaks[p];
      // Printed to 0.1 %, from tokens/s printed whole and peaks to 4 digits.
      EXPECT_NEAR(std::stod(m[4 + 2 * p]), mfu, 0.05 + 2e-3 * mfu) << line;
      EXPECT_NEAR(std::stod(m[5 + 2 * p]), hfu, 0.05 + 2e-3 * hfu) << line;
    }
  }
  EXPECT_EQ(rows, 5) << r.output;
  line_matching(lines, R"(   each over a peak in the step's precision: the hardware's nominal peak, the one papers' .*)");
}

TEST(Lesson17, MfuOverTheMeasuredAndTheNominalPeak) {
  const MemoryFlags x{2, 16, 4, 32, 4, 64};
  // A datasheet's peaks, given.
  expect_lesson_17_mfu_right(x, " --peak-fp32 1000 --peak-bf16 2000", 1000e9, 2000e9);
  // This CPU's, from /proc/cpuinfo, on the intra-op threads the lesson says it has.
  const Outcome r = run(std::string(LESSON_17) + x.text());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::smatch got = line_matching(lines_of(r.output), R"(4\. MFU: .* \((\d+) intra-op threads\))");
  const auto [fp32, bf16] = cpu_nominal_peak(std::stoi(got[1]));
  if (fp32 == 0) {
    line_matching(lines_of(r.output), R"(   hardware: not known here .*)");
    GTEST_SKIP() << "/proc/cpuinfo gives no clock or vector unit here";
  }
  expect_lesson_17_mfu_right(x, "", fp32, bf16);
}

// Parts 2, 3 and 4 print one timing of each row (part 2 takes every policy
// in turn, rounds of them, and keeps the median), not three that disagree;
// each step's peak holds at least what the forward kept and, at its end,
// every gradient (4 N); the loss scaler's steps follow its rule, replayed
// here: a skipped step halves the scale, the second clean step in a row
// doubles it.
TEST(Lesson17, OneTimingPerRowThePeakAndTheScalersSteps) {
  const MemoryFlags x{2, 16, 4, 32, 4, 64};
  const Outcome r = run(std::string(LESSON_17) + x.text().replace(x.text().find("--repeats 1"), 11, "--repeats 3"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  const int64_t d = x.hidden, N = x.layers * (4 * d * d + 2 * d * x.ffn + 9 * d + x.ffn);
  auto plain = [](std::string t) {
    t.erase(std::remove(t.begin(), t.end(), ','), t.end());
    return std::stoll(t);
  };
  const std::regex part2(R"(^   (none|full|selective|matmuls) +([\d,]+) +([\d,]+) += +([\d,]+) +(\S+) +\d+% .*$)");
  const std::regex part4(R"(^   (none|full|selective|matmuls) +(fp32|bf16) +(\S+) +\d+ .*$)");
  std::map<std::string, std::string> ms2, ms4;
  std::smatch m;
  for (const std::string& line : lines) {
    if (std::regex_match(line, m, part2)) {
      ms2[m[1]] = m[5];
      EXPECT_GE(plain(m[4]), std::max<int64_t>(plain(m[3]), 4 * N)) << line;
    } else if (std::regex_match(line, m, part4)) {
      ms4[m[1].str() + " " + m[2].str()] = m[3];
    }
  }
  ASSERT_EQ(ms2.size(), 4u) << r.output;
  ASSERT_EQ(ms4.size(), 5u) << r.output;
  for (const auto& [policy, ms] : ms2) EXPECT_EQ(ms4.at(policy + " fp32"), ms) << policy;
  std::smatch got = line_matching(
      lines, R"(   the step's peak: fp32 ([\d,]+) bytes, bf16 ([\d,]+); its time \(part 2's rounds\): fp32 (\S+) ms,)");
  EXPECT_EQ(got[3], ms2.at("none"));
  got = line_matching(lines, R"(   bf16 (\S+) ms, (\S+)x float32's on this CPU)");
  EXPECT_EQ(got[1], ms4.at("none bf16"));
  // The ratio is of the unrounded times; the two times printed are rounded,
  // so the ratio of what was printed only bounds it.
  const auto [low, high] = ratio_bounds(got[1], ms2.at("none"));
  EXPECT_GE(std::stod(got[2]) + 0.005, low) << got[0];
  EXPECT_LE(std::stod(got[2]) - 0.005, high) << got[0];
  line_matching(lines, R"(   fits\. Times: the median of 3 rounds, every policy in turn .*)");

  // The scaler: PyTorch's defaults beside the demo's, and its steps by the rule.
  got = line_matching(lines, R"(   GradScaler: 2\^(\d+), x2 after (\d+), x0\.5\):)");
  EXPECT_EQ(std::stoi(got[1]), 16);
  EXPECT_EQ(std::stoi(got[2]), 2000);
  const std::regex step(
      R"(^     step (\d): scale 2\^(\d+): (finite, step taken|inf in fp16, step skipped); next 2\^(\d+)$)");
  int steps = 0, clean = 0, expected = -1;
  bool skipped_one = false, grew_one = false;
  for (const std::string& line : lines) {
    if (!std::regex_match(line, m, step)) continue;
    ++steps;
    const int scale = std::stoi(m[2]), next = std::stoi(m[4]);
    if (expected >= 0) EXPECT_EQ(scale, expected) << line;
    const bool taken = m[3] == "finite, step taken";
    clean = taken ? clean + 1 : 0;
    int want = scale;
    if (!taken) want = scale - 1, skipped_one = true;
    if (taken && clean == 2) want = scale + 1, clean = 0, grew_one = true;
    EXPECT_EQ(next, want) << line;
    expected = next;
  }
  EXPECT_EQ(steps, 7);
  // The demo starts where the float16 backward first overflows: step 1 is skipped.
  line_matching(lines, R"(     step 1: scale 2\^\d+: inf in fp16, step skipped; next 2\^\d+)");
  EXPECT_TRUE(skipped_one && grew_one) << "7 steps should show a backoff and a growth";
  // In float16's backward the scaled loss loses fewer gradients to 0 than the unscaled one.
  got = line_matching(lines, R"(     the input's \(an activation's\) +(\S+)% +(\S+)% .*)");
  EXPECT_GE(std::stod(got[1]), std::stod(got[2]));
}

}  // namespace
