// Lesson 15: context parallelism (ring attention, zigzag, Ulysses).
//
// Sequence parallelism (lesson 13) splits the sequence only between the
// tensor-parallel regions; attention still sees every token on every rank,
// and its activations grow with the sequence. Context parallelism splits
// every sequence over C ranks for the whole layer, attention included: each
// rank keeps its queries, and sees the keys and values of the others block
// by block (the ring), all at once (all-gather), or trades the sequence
// split for a head split (Ulysses). The softmax of a row spread over blocks
// is put together from each block's output and log-sum-exp.
//
//   1. two blocks merged by hand: the max-subtracted merge and the sigmoid
//      form equal the whole softmax; log(1 + exp), the ring's first form,
//      overflows where one block's lse passes the other's by 88.7
//   2. the ring on C ranks: output and gradients equal to one process
//   3. contiguous against zigzag: the causal work per rank and ring step
//   4. Ulysses against the ring and all-gather: bytes per rank from the
//      trace beside the formulas
//
//   lesson_15_context_parallel --backend threads --ranks 4
//   distlab-run --nproc-per-node 2 -- lesson_15_context_parallel --backend gloo
#include <CLI/CLI.hpp>
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "lesson.hpp"
#include "over_ranks.hpp"
#include "replicas.hpp"
#include "wire.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "context_parallel/gathered_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/ulysses.hpp"
#include "trace/clock.hpp"

using namespace distlab;
using context_parallel::BlockResult;
using context_parallel::Layout;

namespace {

struct Options {
  comm::JobOptions job;
  int64_t seq = 64;  // S: split over the C ranks
  int64_t batch = 2;
  int64_t heads = 8;     // H: Ulysses gives each rank H / C of them
  int64_t head_dim = 16; // D
  int threads = 0;
};

constexpr double kSame = 1e-5;  // the largest difference from one process the lesson accepts

at::Tensor seeded(at::IntArrayRef sizes, uint64_t seed, const comm::Communicator& comm) {
  return at::randn(sizes, at::detail::createCPUGenerator(seed)).to(comm.device());
}

double largest_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  const double d = (a.detach().cpu().to(at::kDouble) - b.detach().cpu().to(at::kDouble)).abs().max().item<double>();
  return std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
}

// One process's attention over the whole sequence: the reference.
struct Whole {
  at::Tensor q, k, v, out, lse;
};

Whole whole(const Options& o, const comm::Communicator& comm, bool causal, double q_gain = 1.0) {
  Whole w;
  w.q = seeded({o.batch, o.heads, o.seq, o.head_dim}, 1, comm) * q_gain;
  w.k = seeded({o.batch, o.heads, o.seq, o.head_dim}, 2, comm);
  w.v = seeded({o.batch, o.heads, o.seq, o.head_dim}, 3, comm);
  at::Tensor scores = at::matmul(w.q, w.k.transpose(-2, -1)) / std::sqrt(static_cast<double>(o.head_dim));
  if (causal) {
    const at::Tensor pos = at::arange(o.seq, at::kLong).to(comm.device());
    scores = scores.masked_fill(pos.unsqueeze(0) > pos.unsqueeze(1), -std::numeric_limits<float>::infinity());
  }
  w.out = at::matmul(at::softmax(scores, -1), w.v);
  w.lse = at::logsumexp(scores, -1);
  return w;
}

double scale_of(const Options& o) { return 1.0 / std::sqrt(static_cast<double>(o.head_dim)); }

// ------------------------------------------------------------------ part 1
//
// Block b folded into a (what is merged so far), giving ab. Three ways, in
// float32 as the ring merges:
//   max-subtracted (online softmax, FlashAttention's): m = max(lse_a, lse_b),
//     weights w = exp(lse - m), at most 1: out_ab = (w_a out_a + w_b out_b) /
//     (w_a + w_b), lse_ab = m + log(w_a + w_b); nothing overflows;
//   the ring's first form (ring-flash-attention before its pull request 30):
//     lse_ab = lse_a + log(1 + exp(lse_b - lse_a)),
//     out_ab = exp(lse_a - lse_ab) out_a + exp(lse_b - lse_ab) out_b; no max
//     is subtracted, so exp(lse_b - lse_a) overflows to inf once block b's
//     lse passes a's by 88.7 (the log of float32's largest, 3.4e38): lse_ab
//     is inf and out_ab 0;
//   sigmoid (merge_into; ring-flash-attention's since, and PyTorch's
//     context_parallel's): out_ab = out_a - sigmoid(lse_b - lse_a) (out_a - out_b),
//     lse_ab = lse_a - logsigmoid(lse_a - lse_b): the same update with
//     log(1 + exp(d)) written -logsigmoid(-d), finite for any d (logsigmoid
//     takes exp of -|d| only; where sigmoid's exp reaches inf, 1 / (1 + inf)
//     is 0, the right weight).

const double kExpOverflows = std::log(static_cast<double>(std::numeric_limits<float>::max()));  // 88.72

// (out_ab, lse_ab) by the max-subtracted merge.
BlockResult merge_max_subtracted(const BlockResult& a, const BlockResult& b) {
  const at::Tensor m = at::maximum(a.lse, b.lse);
  const at::Tensor wa = at::exp(a.lse - m), wb = at::exp(b.lse - m);
  return {(wa.unsqueeze(-1) * a.out + wb.unsqueeze(-1) * b.out) / (wa + wb).unsqueeze(-1), m + at::log(wa + wb)};
}

// (out_ab, lse_ab) by the ring's first form, log(1 + exp).
BlockResult merge_log_exp(const BlockResult& a, const BlockResult& b) {
  const at::Tensor lse = a.lse + at::log(1 + at::exp(b.lse - a.lse));
  return {at::exp(a.lse - lse).unsqueeze(-1) * a.out + at::exp(b.lse - lse).unsqueeze(-1) * b.out, lse};
}

// A merge against the whole softmax: the largest difference of out and lse
// over the rows it gave finite, and the rows it did not.
struct Against {
  double difference = 0;
  int64_t broken = 0;        // rows with lse or out not finite
  int64_t inf_and_zero = 0;  // of them, rows with lse +inf and out 0
};

Against against_whole(const BlockResult& got, const Whole& w) {
  const at::Tensor finite = at::isfinite(got.lse) & at::isfinite(got.out).all(-1);
  Against r;
  r.broken = got.lse.numel() - finite.sum().item<int64_t>();
  r.inf_and_zero = (at::isposinf(got.lse) & (got.out == 0).all(-1)).sum().item<int64_t>();
  const at::Tensor rows = finite.unsqueeze(-1).expand_as(got.out);
  r.difference = std::max(largest_difference(got.out.masked_select(rows), w.out.masked_select(rows)),
                          largest_difference(got.lse.masked_select(finite), w.lse.masked_select(finite)));
  return r;
}

std::string against_text(const Against& a) {
  if (a.broken > 0) return comm::counted(a.broken, "row") + " inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", a.difference);
  return text;
}

bool two_blocks(comm::Communicator& world, const Options& o) {
  if (world.rank() != 0) return true;
  const double scale = scale_of(o);
  const int64_t half = o.seq / 2;
  const double gains[] = {1.0, 40.0};
  Against max_subtracted[2], log_exp[2], sigmoid[2];
  double biggest = 0, widest = 0;  // q x 40: the largest lse, the largest lse_b - lse_a
  int64_t past = 0;                // q x 40: rows whose lse_b - lse_a passes 88.7
  double lse_a = 0, lse_b = 0, lse_ab = 0;
  bool ok = true;
  for (int g = 0; g < 2; ++g) {
    const Whole w = whole(o, world, /*causal=*/false, gains[g]);
    const BlockResult a =
        context_parallel::block_attention(w.q, w.k.narrow(-2, 0, half), w.v.narrow(-2, 0, half), scale);
    const BlockResult b =
        context_parallel::block_attention(w.q, w.k.narrow(-2, half, o.seq - half), w.v.narrow(-2, half, o.seq - half),
                                          scale);
    BlockResult ab = a;
    context_parallel::merge_into(ab, b);
    sigmoid[g] = against_whole(ab, w);
    max_subtracted[g] = against_whole(merge_max_subtracted(a, b), w);
    log_exp[g] = against_whole(merge_log_exp(a, b), w);
    const at::Tensor d = (b.lse - a.lse).to(at::kDouble);
    const int64_t over = (d > kExpOverflows).sum().item<int64_t>();
    if (g == 0) {
      lse_a = a.lse.index({0, 0, 0}).item<double>();
      lse_b = b.lse.index({0, 0, 0}).item<double>();
      lse_ab = ab.lse.index({0, 0, 0}).item<double>();
    } else {
      biggest = std::max(a.lse.max().item<double>(), b.lse.max().item<double>());
      widest = d.max().item<double>();
      past = over;
    }
    // float32 keeps about 7 digits of an lse near the largest.
    const double allowed = kSame * std::max(1.0, std::max(a.lse.max().item<double>(), b.lse.max().item<double>()));
    for (const Against* stable : {&sigmoid[g], &max_subtracted[g]})
      ok = ok && stable->broken == 0 && stable->difference <= allowed;
    // log(1 + exp) breaks in exactly the rows past 88.7 (lse inf, out 0), and is right in the others.
    ok = ok && log_exp[g].broken == over && log_exp[g].inf_and_zero == over && log_exp[g].difference <= allowed;
  }
  const double m = std::max(lse_a, lse_b);
  std::printf("\n1. Two blocks merged by hand\n"
              "  q, k, v: (%lld, %lld, %lld, %lld); the keys cut in two blocks of %lld, each attended alone:\n"
              "    out_b = softmax(q k_b^T / sqrt(D)) v_b      lse_b = log sum_j exp(q k_bj^T / sqrt(D))\n"
              "  a: what is merged so far (here block a), b: the block that comes, ab: the two merged\n"
              "  query 0 of head 0: lse_a = %.4f, lse_b = %.4f, m = max(lse_a, lse_b) = %.4f\n"
              "    lse_ab = m + log(exp(lse_a - m) + exp(lse_b - m)) = %.4f\n"
              "    block b's weight exp(lse_b - lse_ab) = sigmoid(lse_b - lse_a) = %.4f\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.heads), static_cast<long long>(o.seq),
              static_cast<long long>(o.head_dim), static_cast<long long>(half), lse_a, lse_b, m, lse_ab,
              1.0 / (1.0 + std::exp(lse_a - lse_b)));
  std::printf("  %-66s %8s %11s\n", "each merge against the whole softmax, every row: largest difference", "q x 1",
              "q x 40");
  const char* forms[][3] = {
      {"max-subtracted", "lse_ab = m + log(w_a + w_b), w = exp(lse - m)",
       "out_ab = (w_a out_a + w_b out_b) / (w_a + w_b)"},
      {"log(1 + exp)", "lse_ab = lse_a + log(1 + exp(lse_b - lse_a))",
       "out_ab = exp(lse_a - lse_ab) out_a + exp(lse_b - lse_ab) out_b"},
      {"sigmoid", "lse_ab = lse_a - logsigmoid(lse_a - lse_b)",
       "out_ab = out_a - sigmoid(lse_b - lse_a) (out_a - out_b)"},
  };
  const Against* rows[] = {max_subtracted, log_exp, sigmoid};
  for (int i = 0; i < 3; ++i)
    std::printf("    %-15s %-48s %8s %11s\n    %-15s %s\n", forms[i][0], forms[i][1], against_text(rows[i][0]).c_str(),
                against_text(rows[i][1]).c_str(), "", forms[i][2]);
  std::printf("  q x 40: lse up to %.0f, which float32 holds to about %.0e (1e-5 x %.0f allowed);\n",
              biggest, biggest * 1.2e-7, biggest);
  if (past > 0)
    std::printf("  lse_b - lse_a reaches %.1f and float32's exp overflows past 88.7: log(1 + exp), the\n"
                "  ring's first merge, gives lse_ab = inf and out_ab = 0 in the %s past it. sigmoid\n"
                "  is the same update with log(1 + exp(d)) written -logsigmoid(-d): finite for any d.\n",
                widest, comm::counted(past, "row").c_str());
  else
    std::printf("  lse_b - lse_a reaches %.1f, under 88.7, where float32's exp overflows: log(1 + exp),\n"
                "  the ring's first merge, holds here. sigmoid is the same update, finite for any d.\n",
                widest);
  std::printf("  Look: the merge needs only each block's out and lse, so no rank holds a whole row of\n"
              "  scores; sigmoid gives the max-subtracted merge's numbers in the ring's one-line update.\n");
  return ok;
}

// ------------------------------------------------------------------ part 2

// This rank's q, k, v (and positions) under `layout`.
struct Mine {
  at::Tensor positions, q, k, v;
};

Mine mine_of(const Whole& w, Layout layout, const Options& o, const comm::Communicator& comm) {
  Mine m;
  m.positions = context_parallel::positions_of(layout, o.seq, comm.size(), comm.rank());
  const at::Tensor at_device = m.positions.to(comm.device());
  m.q = w.q.index_select(-2, at_device);
  m.k = w.k.index_select(-2, at_device);
  m.v = w.v.index_select(-2, at_device);
  return m;
}

// The median of `repeats` timings of `f`, every rank timing its own (they
// all run it at once, as in the ring), the largest over the ranks.
template <typename F>
double median_seconds(comm::Communicator& world, int repeats, F f) {
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    world.barrier();
    const int64_t t0 = trace::now_us();
    f();
    seconds.push_back(1e-6 * double(trace::now_us() - t0));
  }
  std::sort(seconds.begin(), seconds.end());
  return lessons::max_over_ranks(world, seconds[seconds.size() / 2]);
}

// When a hop hides behind a block's compute: a full block of L queries
// against L keys costs 4 B H L^2 D FLOPs (q k^T, then the weights times v);
// the hop that brings the next one moves K and V, 2 B H L D floats. The
// compute takes longer than the hop when 4 B H L^2 D / P >= 8 B H L D / W
// (P FLOP/s, W bytes/s): L >= 2 P / W. Derived, then measured here.
void hop_against_block(comm::Communicator& world, const Options& o, const Mine& m) {
  const int C = world.size(), next = (world.rank() + 1) % C, previous = (world.rank() + C - 1) % C;
  const double L = double(o.seq / C), BHD = double(o.batch * o.heads * o.head_dim);
  const double flops = 4 * BHD * L * L, bytes = 2 * BHD * L * 4;
  const double block =
      median_seconds(world, 5, [&] { context_parallel::block_attention(m.q, m.k, m.v, scale_of(o)); });
  const double hop = median_seconds(world, 5, [&] {
    at::Tensor k = at::empty_like(m.k), v = at::empty_like(m.v);
    std::vector<comm::WorkPtr> pending = {world.irecv(k, previous, 90), world.irecv(v, previous, 91),
                                          world.isend(m.k, next, 90), world.isend(m.v, next, 91)};
    for (auto& w : pending) w->wait();
  });
  if (world.rank() != 0) return;
  const double P = flops / block, W = bytes / hop;
  std::printf("  a hop against a block's compute: a full block of L = S/C = %.0f queries x %.0f keys costs\n"
              "  4 B H L^2 D = %.0f FLOPs; the hop bringing the next moves K, V: 2 B H L D x 4 = %.0f bytes.\n"
              "  L/2 = %.0f FLOPs a byte: the hop hides when L >= 2 P / W (P FLOP/s, W bytes/s)\n"
              "    measured here (median of 5, slowest rank): block %.3f ms (%.2f GFLOP/s), hop %.3f ms\n"
              "    (%.2f GB/s): 2 P / W = %.0f tokens, so at L = %.0f the hop %s\n",
              L, L, flops, bytes, L / 2, block * 1e3, P / 1e9, hop * 1e3, W / 1e9, std::ceil(2 * P / W), L,
              block >= hop ? "hides" : "does not hide");
  std::printf("    a GPU at 1e15 FLOP/s: L >= 40,000 tokens a rank over 50 GB/s, 4,445 over 450 GB/s\n");
}

bool ring(comm::Communicator& world, const Options& o) {
  const double scale = scale_of(o);
  Whole w = whole(o, world, /*causal=*/true);
  // The reference's gradients of sum(out * G).
  const at::Tensor G = seeded({o.batch, o.heads, o.seq, o.head_dim}, 4, world);
  at::Tensor q = w.q.clone().requires_grad_(true), k = w.k.clone().requires_grad_(true);
  at::Tensor v = w.v.clone().requires_grad_(true);
  {
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
    const at::Tensor pos = at::arange(o.seq, at::kLong).to(world.device());
    scores = scores.masked_fill(pos.unsqueeze(0) > pos.unsqueeze(1), -std::numeric_limits<float>::infinity());
    (at::matmul(at::softmax(scores, -1), v) * G).sum().backward();
  }
  const Mine m = mine_of(w, Layout::kContiguous, o, world);
  const at::Tensor rows = m.positions.to(world.device());
  const BlockResult got = context_parallel::ring_attention(world, m.q, m.k, m.v, scale, m.positions, true, 0);
  const auto grads = context_parallel::ring_attention_backward(world, m.q, m.k, m.v, scale, m.positions, true, got,
                                                               G.index_select(-2, rows), 10);
  const double d_out = lessons::max_over_ranks(
      world, std::max(largest_difference(got.out, w.out.index_select(-2, rows)),
                      largest_difference(got.lse, w.lse.index_select(-1, rows))));
  const double d_grad = lessons::max_over_ranks(
      world, std::max({largest_difference(grads.dq, q.grad().index_select(-2, rows)),
                       largest_difference(grads.dk, k.grad().index_select(-2, rows)),
                       largest_difference(grads.dv, v.grad().index_select(-2, rows))}));
  if (world.rank() == 0) {
    const int C = world.size();
    std::printf("\n2. The ring on %d ranks, causal, contiguous layout\n"
                "  each rank holds %lld of the %lld tokens; at step s rank r holds the keys and values of\n"
                "  rank r - s, sends them on to r + 1 while it computes, and merges the block in.\n"
                "  against one process (largest difference over ranks):\n"
                "    output and lse  %.2e\n"
                "    dQ, dK, dV      %.2e   (the backward ring: dK, dV travel with their block and\n"
                "                               are home after %d hops)\n",
                C, static_cast<long long>(o.seq / C), static_cast<long long>(o.seq), d_out, d_grad, C);
  }
  hop_against_block(world, o, m);
  return d_out <= kSame && d_grad <= kSame;
}

// ------------------------------------------------------------------ part 3

void print_grid(const context_parallel::RingPlan& plan) {
  const int chunks = context_parallel::chunk_count(plan.layout, plan.ranks);
  std::printf("    query chunk x key chunk: rank/step that computes it ('.' skipped, causal)\n      ");
  for (int k = 0; k < chunks; ++k) std::printf(" k%-3d", k);
  std::printf("\n");
  for (int q = 0; q < chunks; ++q) {
    std::printf("    q%-2d", q);
    for (int k = 0; k < chunks; ++k) {
      std::string cell = " .";
      for (const auto& b : plan.blocks)
        if (b.q_chunk == q && b.k_chunk == k && b.cover != context_parallel::Cover::kSkipped)
          cell = std::to_string(b.rank) + "/" + std::to_string(b.step);
      std::printf(" %-4s", cell.c_str());
    }
    std::printf("\n");
  }
}

// The contiguous ring's efficiency on other rank counts, from the ring
// plan alone (counting pairs needs no ranks): what the class predicts for 8.
void print_other_sizes(int64_t seq) {
  const auto percent = [](double share) {
    char text[16];
    std::snprintf(text, sizeof text, "%.1f%%", 100.0 * share);
    return std::string(text);
  };
  std::string counted, limit;
  for (int C : {2, 4, 8, 16}) {
    if (seq % C != 0) continue;
    const auto plan = context_parallel::make_ring_plan(Layout::kContiguous, C, seq, true);
    const char* sep = counted.empty() ? "" : ", ";
    counted += sep + std::to_string(C) + ": " + percent(plan.balanced_time() / static_cast<double>(plan.ring_time()));
    limit += sep + percent(static_cast<double>(C) / (2 * C - 1));
  }
  std::printf("    the same %lld tokens on more ranks, counted by the ring plan: %s\n", static_cast<long long>(seq),
              counted.c_str());
  std::printf("    (C/(2C-1): %s)\n", limit.c_str());
}

bool layouts(comm::Communicator& world, const Options& o) {
  const int C = world.size();
  const Whole w = whole(o, world, /*causal=*/true);
  bool ok = true;
  for (Layout layout : {Layout::kContiguous, Layout::kZigzag}) {
    const Mine m = mine_of(w, layout, o, world);
    context_parallel::RingWork work;
    const BlockResult got =
        context_parallel::ring_attention(world, m.q, m.k, m.v, scale_of(o), m.positions, true, 0, &work);
    const at::Tensor rows = m.positions.to(world.device());
    const double d = lessons::max_over_ranks(world, largest_difference(got.out, w.out.index_select(-2, rows)));
    // Every rank's pairs per step, from its own counts (rank 0 prints them).
    std::vector<std::vector<double>> per_step;
    for (int s = 0; s < C; ++s) per_step.push_back(lessons::one_per_rank(world, static_cast<double>(work.computed[s])));
    const auto plan = context_parallel::make_ring_plan(layout, C, o.seq, true);
    bool as_planned = true;
    for (int s = 0; s < C; ++s)
      for (int r = 0; r < C; ++r) as_planned = as_planned && per_step[s][r] == static_cast<double>(plan.pairs(r, s));
    ok = ok && d <= kSame && as_planned;
    if (world.rank() != 0) continue;
    if (layout == Layout::kContiguous)
      std::printf("\n3. Contiguous against zigzag: causal pairs (query, key) computed per rank and ring step\n");
    std::printf("  %s (%d chunks of %lld tokens; rank r holds %s), largest difference %.2e\n",
                context_parallel::to_string(layout), context_parallel::chunk_count(layout, C),
                static_cast<long long>(plan.chunk), layout == Layout::kZigzag ? "chunks r and 2C-1-r" : "chunk r", d);
    if (C <= 8) print_grid(plan);
    std::printf("    rank");
    for (int s = 0; s < C; ++s) std::printf("  step %-3d", s);
    std::printf("      total\n");
    for (int r = 0; r < C; ++r) {
      double total = 0;
      std::printf("    %4d", r);
      for (int s = 0; s < C; ++s) {
        std::printf("  %8.0f", per_step[s][r]);
        total += per_step[s][r];
      }
      std::printf("  %9.0f\n", total);
    }
    const double ring = static_cast<double>(plan.ring_time()), balanced = plan.balanced_time();
    std::printf("    ring time %.0f (busiest rank per step), even %.0f: %.1f%% efficient\n", ring, balanced,
                100.0 * balanced / ring);
    if (layout == Layout::kContiguous)
      std::printf("    (C/(2C-1) = %.1f%% as the chunks grow); ", 100.0 * C / (2 * C - 1));
    else
      std::printf("    ");
    std::printf("the counts are the ring plan's: %s\n", as_planned ? "yes" : "NO");
    if (layout == Layout::kContiguous) print_other_sizes(o.seq);
  }
  if (world.rank() == 0)
    std::printf("  Look: a step takes as long as its busiest rank. Contiguous gives the last rank every\n"
                "  block and the first one a single triangle; zigzag pairs an early chunk with a late one.\n");
  return ok;
}

// ------------------------------------------------------------------ part 4

struct Method {
  const char* name;
  double formula;  // bytes rank 0 sends in one attention forward
};

bool ulysses(comm::Communicator& world, const Options& o, lessons::Wire& wire) {
  const int C = world.size();
  const double n = static_cast<double>(o.batch * o.heads * (o.seq / C) * o.head_dim);  // local q, k, v or out
  const double L = static_cast<double>(o.seq / C);
  const double f = 4, pos = 8;  // float32, int64 positions
  const Whole w = whole(o, world, /*causal=*/true);
  const Mine m = mine_of(w, Layout::kContiguous, o, world);
  const at::Tensor rows = m.positions.to(world.device());
  std::string refusal;  // Ulysses' own words when the heads do not divide
  std::vector<Method> methods = {
      {"ring", (C - 1) * (2 * n * f + L * pos)},
      {"all_gather", (C - 1) * (2 * n * f + L * pos)},
      {"ulysses", 4 * (C - 1.0) / C * n * f + (C - 1.0) / C * n / o.head_dim * f + (C - 1) * L * pos},
  };
  std::vector<double> traced, differences;
  for (const Method& method : methods) {
    const std::string name = method.name;
    wire.clear();
    const int64_t t0 = trace::now_us();
    BlockResult got;
    if (name == "ring") {
      got = context_parallel::ring_attention(world, m.q, m.k, m.v, scale_of(o), m.positions, true, 0);
    } else if (name == "all_gather") {
      got = context_parallel::all_gather_attention(world, m.q, m.k, m.v, scale_of(o), m.positions, true, 0);
    } else {
      try {
        got = context_parallel::ulysses_attention(world, m.q, m.k, m.v, scale_of(o), m.positions, true, 0);
      } catch (const std::invalid_argument& e) {  // every rank refuses alike, before any message
        refusal = e.what();
        traced.push_back(-1);
        differences.push_back(0);
        continue;
      }
    }
    world.barrier();
    traced.push_back(static_cast<double>(wire.messages_sent(t0, trace::now_us())));
    differences.push_back(lessons::max_over_ranks(world, largest_difference(got.out, w.out.index_select(-2, rows))));
  }
  bool ok = true;
  for (size_t i = 0; i < methods.size(); ++i)
    ok = ok && differences[i] <= kSame && (world.rank() != 0 || traced[i] < 0 || traced[i] == methods[i].formula);
  if (world.rank() != 0) return ok;
  std::printf("\n4. Ulysses against the ring and all-gather: one causal attention forward, rank 0's bytes\n"
              "  B=%lld H=%lld S=%lld D=%lld, C=%d: n = B H S/C D = %.0f floats per local q, k, v or out\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.heads), static_cast<long long>(o.seq),
              static_cast<long long>(o.head_dim), C, n);
  std::printf("  %-11s %9s %9s  %-38s %s\n", "method", "trace", "formula", "the formula", "vs one process");
  const char* forms[] = {"(C-1) hops x (K, V 2n x 4 + S/C x 8)",
                         "K, V, positions gathered: the same",
                         "4 (C-1)/C n x 4 + lse, positions"};
  for (size_t i = 0; i < methods.size(); ++i) {
    if (traced[i] < 0) {
      std::printf("  %-11s %9s %9s  refused:\n    %s\n", methods[i].name, "-", "-", refusal.c_str());
      continue;
    }
    std::printf("  %-11s %9.0f %9.0f  %-38s %.2e\n", methods[i].name, traced[i], methods[i].formula, forms[i],
                differences[i]);
  }
  std::printf("  Look: the ring and all-gather send every other rank's K and V to every rank:\n"
              "  2 (C-1) n floats whatever C is. Ulysses sends 4 (C-1)/C n: less for C > 2, and it\n"
              "  shrinks relative to the ring as C grows; but each rank needs whole heads (H %% C == 0).\n"
              "  The ring overlaps each hop with a block's compute; all-gather holds all K, V at once.\n");
  return ok;
}

void run(comm::Communicator& world, const Options& o, lessons::Parts& parts) {
  const int C = world.size();
  const int threads = lessons::share_cores(o.threads);
  if (o.seq % (2 * C) != 0)
    throw comm::SetupError("lesson 15: --seq " + std::to_string(o.seq) + " does not split into 2C = " +
                           std::to_string(2 * C) + " zigzag chunks; choose a multiple of " + std::to_string(2 * C));
  if (world.rank() == 0)
    std::printf("Lesson 15: context parallelism  (%s backend, %s, %d thread(s) each)\n", world.backend().c_str(),
                comm::counted(C, "rank").c_str(), threads);
  lessons::Wire wire(world);
  bool ok = true;

  parts.begin(world, "Two blocks merged by hand");
  ok = two_blocks(world, o) && ok;

  parts.begin(world, "The ring");
  ok = ring(world, o) && ok;

  parts.begin(world, "Contiguous against zigzag");
  ok = layouts(world, o) && ok;

  parts.begin(world, "Ulysses against the ring and all-gather");
  ok = ulysses(world, o, wire) && ok;

  if (world.rank() == 0)
    std::printf("\nNext: --ranks 2 and 8, --seq 256 (the causal imbalance stays, the work grows as S^2),\n"
                "--heads 6 on 4 ranks (Ulysses refuses), --backend gloo under distlab-run.\n");
  if (lessons::max_over_ranks(world, ok ? 0.0 : 1.0) > 0) throw std::runtime_error("a check did not hold (see above)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts(
      {"Two blocks merged by hand", "The ring", "Contiguous against zigzag", "Ulysses against the ring and all-gather"});
  CLI::App app{"Lesson 15: context parallelism: blocks of attention merged by their log-sum-exp, the ring equal to "
               "one process, contiguous against zigzag, Ulysses' all-to-alls against the ring"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--seq", o.seq, "sequence length S (split over the ranks; a multiple of 2 x ranks)")
      ->check(CLI::Range(2, 65536))->capture_default_str();
  app.add_option("--batch", o.batch, "batch B")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads H (Ulysses needs a multiple of the ranks)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--head-dim", o.head_dim, "width of one head D")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_15_context_parallel", o.job,
                             [&](comm::Communicator& comm) { run(comm, o, parts); });
}
