// Ring reduce-scatter and all-gather: every rank sends to its right
// neighbour (r + 1) mod p, one chunk per step, p - 1 steps each.
//
// Reduce-scatter, p = 4: in step s rank r sends chunk (r - s - 1) mod p, the
// one it has just combined, and the receiver adds its own piece:
//
//   step 0: 0->1 c3   1->2 c0   2->3 c1   3->0 c2
//   step 1: 0->1 c2   1->2 c3   2->3 c0   3->0 c1
//   step 2: 0->1 c1   1->2 c2   2->3 c3   3->0 c0    rank r now holds chunk r, complete
//
// All-gather then passes the finished chunks on: in step s rank r forwards
// chunk (r - s) mod p. Each rank sends (p - 1) chunks in each phase, so a
// ring all-reduce sends 2 (p - 1) / p of the buffer per rank, whatever p is.
#include "collectives/plan_builders.hpp"

namespace distlab::collectives::detail {
namespace {

int wrap(int r, int p) { return ((r % p) + p) % p; }

void add_ring_pass(Plan& plan, const char* phase, int chunk_lag, bool reduce) {
  const int p = plan.world_size;
  for (int s = 0; s + 1 < p; ++s) {
    Step step{phase, {}};
    for (int r = 0; r < p; ++r)
      step.transfers.push_back(chunk_block(plan, r, wrap(r + 1, p), wrap(r - s - chunk_lag, p), 1, reduce));
    add_step(plan, std::move(step));
  }
}

}  // namespace

void add_ring_reduce_scatter(Plan& plan) { add_ring_pass(plan, "reduce-scatter", /*chunk_lag=*/1, /*reduce=*/true); }

void add_ring_all_gather(Plan& plan) { add_ring_pass(plan, "all-gather", /*chunk_lag=*/0, /*reduce=*/false); }

}  // namespace distlab::collectives::detail
