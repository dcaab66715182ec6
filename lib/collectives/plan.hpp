// A collective algorithm as plain data: who sends which piece of the buffer
// to whom, step by step.
//
// The same Plan is what the executor runs over a Communicator, what the cost
// model prices, what the tests replay on paper, and what the visualizer
// animates. No LibTorch here.
//
// Conventions
// - The buffer has `count` elements of `elem_bytes` bytes on every rank.
//   Chunked algorithms split it into `plan.parts` chunks (world_size for the
//   ring, the largest power of two <= world_size for halving-doubling, 1 for
//   the rest); chunk c covers chunk_range(count, parts, c) (the first
//   count % parts chunks get one element more), so any count works, 0 and
//   count < p included.
// - reduce_scatter: rank r ends with chunk r reduced (other chunks undefined).
//   all_gather: rank r starts with chunk r valid; all end with every chunk.
//   result_range() says which elements hold the result on each rank.
// - Within one step a rank's sends read its buffer as it was when the step
//   began; received pieces are then combined (reduce) or copied in.
// - all_to_all works on two buffers: rank r's input holds one block for
//   every rank d (counts[r * p + d] elements, in rank order), its output
//   one block from every rank s (counts[s * p + r] elements, in rank
//   order); a transfer reads `range` of the sender's input and writes the
//   receiver's output at `dst_offset`. A rank's block for itself is copied,
//   not sent. make_plan() gives equal blocks (count a multiple of p);
//   make_all_to_all_plan() any counts, zeros included (all-to-all-v).
// - A transfer of zero elements is left out (nothing to move, no latency to
//   pay), and so is a step left with no transfer: with count 0 a plan has
//   no steps at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distlab::collectives {

enum class Collective { kBroadcast, kReduce, kAllReduce, kReduceScatter, kAllGather, kAllToAll };

enum class Algorithm {
  kSequential,       // broadcast/reduce: the root talks to each rank in turn
  kTree,             // broadcast/reduce: binomial tree, ceil(log2 p) steps
  kReduceBroadcast,  // all-reduce: tree reduce to rank 0, then tree broadcast
  kRing,             // all-reduce = reduce-scatter + all-gather around a ring
  kHalvingDoubling,  // all-reduce: recursive halving (reduce-scatter) + doubling (all-gather)
  kPairwise,         // all-to-all: p - 1 steps; in step k rank r sends to r + k, receives from r - k
  kNative,           // the backend's own collective: runs, but has no Plan
};

struct Range {
  int64_t offset = 0;  // in elements
  int64_t count = 0;
};

// Elements of chunk `c` when `count` elements are split into `parts` chunks.
Range chunk_range(int64_t count, int parts, int c);

struct Transfer {
  int src = 0;
  int dst = 0;
  int chunk = -1;       // which chunk moves (-1: the whole buffer)
  int chunks = 1;       // how many consecutive chunks from `chunk` (halving-doubling moves blocks)
  Range range;          // the elements moved
  bool reduce = false;  // true: dst combines into its buffer; false: dst overwrites
  int64_t dst_offset = -1;  // all_to_all: where the piece lands in dst's output; -1: at range.offset

  // The elements the piece lands on at dst.
  Range landing() const { return {dst_offset < 0 ? range.offset : dst_offset, range.count}; }
};

struct Step {
  // What this step is part of, for people: "broadcast", "reduce",
  // "reduce-scatter", "all-gather", "fold" (extra ranks hand their data to
  // the power-of-two group), "unfold" (and get the result back).
  std::string phase;
  std::vector<Transfer> transfers;
};

struct Plan {
  Collective collective = Collective::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  int world_size = 1;
  int root = 0;  // broadcast/reduce; 0 elsewhere
  int64_t count = 0;
  int elem_bytes = 4;
  int parts = 1;  // chunks the buffer is split into (see Conventions)
  std::vector<Step> steps;
  // all_to_all: counts[src * world_size + dst] elements go from src to dst
  // (and count is the largest input); empty for the other collectives.
  std::vector<int64_t> counts;

  // all_to_all: the block of `rank`'s input for `peer`, and of its output
  // from `peer`; the sizes of its input and output (count elsewhere).
  Range input_block(int rank, int peer) const;
  Range output_block(int rank, int peer) const;
  int64_t input_count(int rank) const;
  int64_t output_count(int rank) const;

  // Bytes rank `rank` sends over the whole plan.
  int64_t bytes_sent_by(int rank) const;
  int64_t bytes_received_by(int rank) const;
};

// Builds the plan. Throws std::invalid_argument (naming the bad value) for
// world_size < 1 or > 1024, count < 0, elem_bytes < 1, a root out of range,
// or an algorithm that does not implement the collective (kNative included:
// the backend's algorithm is not ours to describe).
Plan make_plan(Collective collective, Algorithm algorithm, int world_size, int64_t count, int root = 0,
               int elem_bytes = 4);

// all_to_all with any counts (`counts` as Plan::counts, world_size^2 of
// them, none negative), pairwise.
Plan make_all_to_all_plan(const std::vector<int64_t>& counts, int world_size, int elem_bytes = 4);

// The elements of `rank`'s buffer that hold the result once the plan has
// run: the whole buffer, except reduce (root only; empty elsewhere) and
// reduce_scatter (chunk `rank`) and all_to_all (its output).
Range result_range(const Plan& plan, int rank);

// The plan as text, a heading and one line per step, for lessons to print:
//   broadcast/tree: 4 ranks, root 0, 10 elements of 4 bytes, 2 steps
//   step 0 (broadcast): 0->1 all 40 B
//   step 1 (broadcast): 0->2 all 40 B, 1->3 all 40 B
// A piece is "all" (the whole buffer), "chunk c" or "chunks a-b", and
// "added" when the receiver combines it instead of overwriting.
std::string to_text(const Plan& plan);

// The algorithms that implement `collective`, in teaching order (kNative,
// which implements every collective, is not listed).
std::vector<Algorithm> algorithms_for(Collective collective);

const char* to_string(Collective collective);
const char* to_string(Algorithm algorithm);
// "broadcast", "all_reduce", ... / "ring", "tree", ... ('-' accepted for '_').
// Throw std::invalid_argument listing the valid names.
Collective parse_collective(const std::string& name);
Algorithm parse_algorithm(const std::string& name);

}  // namespace distlab::collectives
