// Which query x key blocks each rank computes at each step of the ring, as
// plain data (no LibTorch): what the visualizer draws, the lesson prints
// and the tests check ring_attention's own counts against.
//
// The sequence of S tokens is cut in equal chunks: C for the contiguous
// layout (rank r holds chunk r, picotron's), 2C for zigzag (rank r holds
// chunks r and 2C-1-r). At step s rank r holds the keys of rank
// (r - s) mod C and computes its query chunks against those key chunks.
// Under a causal mask a query chunk against a key chunk is
//   full      the keys all come before the queries: c^2 pairs
//   diagonal  the same chunk: the lower triangle, c (c + 1) / 2 pairs
//   skipped   the keys all come after: nothing to compute
// Contiguous leaves rank C-1 with C full-or-diagonal blocks and rank 0 with
// one: the last rank sets the pace. Zigzag pairs an early chunk with a late
// one, so every rank has the same work.
#pragma once

#include <cstdint>
#include <vector>

namespace distlab::context_parallel {

enum class Layout { kContiguous, kZigzag };
const char* to_string(Layout layout);

// Chunks the sequence is cut in (C or 2C) and the ones `rank` holds, in order.
int chunk_count(Layout layout, int ranks);
// Tokens per chunk of a sequence of `length`. Throws std::invalid_argument
// naming the sizes when it does not split: S a multiple of C (contiguous),
// of 2C (zigzag).
int64_t chunk_length(Layout layout, int ranks, int64_t length);
std::vector<int> chunks_of(Layout layout, int ranks, int rank);

enum class Cover { kSkipped, kDiagonal, kFull };
const char* to_string(Cover cover);

struct BlockWork {
  int rank = 0;     // who computes it
  int step = 0;     // at which ring step
  int q_chunk = 0;  // the query chunk (rows of the attention matrix)
  int k_chunk = 0;  // the key chunk (columns)
  Cover cover = Cover::kFull;
  int64_t pairs = 0;  // query x key pairs computed
};

struct RingPlan {
  Layout layout = Layout::kContiguous;
  int ranks = 1;
  int64_t length = 0;
  bool causal = true;
  int64_t chunk = 0;              // tokens per chunk
  std::vector<BlockWork> blocks;  // every (rank, step, query chunk, key chunk), rank-major then step

  // The rank whose keys and values `rank` holds at `step`.
  int held_from(int rank, int step) const { return ((rank - step) % ranks + ranks) % ranks; }
  int64_t pairs(int rank, int step) const;
  int64_t pairs(int rank) const;
  // The ring's time in pairs: every step waits for its busiest rank, so the
  // sum over steps of the most any rank computes; and the time with the
  // work spread evenly (all pairs / C). balanced / ring is the efficiency:
  // C / (2C - 1) for contiguous as the chunks grow, 1 for zigzag.
  int64_t ring_time() const;
  double balanced_time() const;
};

// Throws as chunk_length() does.
RingPlan make_ring_plan(Layout layout, int ranks, int64_t length, bool causal);

}  // namespace distlab::context_parallel
