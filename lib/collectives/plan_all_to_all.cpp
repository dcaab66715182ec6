// All-to-all as a Plan: every rank has a block for every other rank.
//
// Pairwise exchange (MPI's and gloo's way for large messages): p - 1
// steps; in step k rank r sends its block for rank r + k and receives the
// block of rank r - k (mod p), so each step every rank sends one message
// and receives one, and no two ranks send to the same rank at once. A
// rank's block for itself is copied, not sent.
#include <numeric>
#include <stdexcept>

#include "collectives/plan.hpp"
#include "collectives/plan_builders.hpp"

namespace distlab::collectives {
namespace {

int64_t count_of(const Plan& plan, int src, int dst) {
  return plan.counts[static_cast<size_t>(src) * plan.world_size + dst];
}

}  // namespace

Range Plan::input_block(int rank, int peer) const {
  int64_t offset = 0;
  for (int d = 0; d < peer; ++d) offset += count_of(*this, rank, d);
  return {offset, count_of(*this, rank, peer)};
}

Range Plan::output_block(int rank, int peer) const {
  int64_t offset = 0;
  for (int s = 0; s < peer; ++s) offset += count_of(*this, s, rank);
  return {offset, count_of(*this, peer, rank)};
}

int64_t Plan::input_count(int rank) const {
  if (collective != Collective::kAllToAll) return count;
  const Range last = input_block(rank, world_size - 1);
  return last.offset + last.count;
}

int64_t Plan::output_count(int rank) const {
  if (collective != Collective::kAllToAll) return count;
  const Range last = output_block(rank, world_size - 1);
  return last.offset + last.count;
}

Plan make_all_to_all_plan(const std::vector<int64_t>& counts, int world_size, int elem_bytes) {
  // The checks make_plan does, on a stand-in count.
  Plan plan = make_plan(Collective::kAllToAll, Algorithm::kPairwise, world_size, 0, 0, elem_bytes);
  if (counts.size() != static_cast<size_t>(world_size) * world_size)
    throw std::invalid_argument("all_to_all needs " + std::to_string(world_size) + " x " +
                                std::to_string(world_size) + " counts (one per sender and receiver), got " +
                                std::to_string(counts.size()));
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] < 0)
      throw std::invalid_argument("all_to_all: rank " + std::to_string(i / world_size) + " sends rank " +
                                  std::to_string(i % world_size) + " a negative count (" +
                                  std::to_string(counts[i]) + ")");
  plan.counts = counts;
  plan.count = 0;
  for (int r = 0; r < world_size; ++r) plan.count = std::max(plan.count, plan.input_count(r));
  detail::add_pairwise_exchange(plan);
  return plan;
}

namespace detail {

void add_pairwise_exchange(Plan& plan) {
  const int p = plan.world_size;
  for (int k = 1; k < p; ++k) {
    Step step{"exchange", {}};
    for (int r = 0; r < p; ++r) {
      const int d = (r + k) % p;
      Transfer t;
      t.src = r;
      t.dst = d;
      t.chunk = d;
      t.range = plan.input_block(r, d);
      t.dst_offset = plan.output_block(d, r).offset;
      step.transfers.push_back(t);
    }
    add_step(plan, std::move(step));
  }
}

}  // namespace detail
}  // namespace distlab::collectives
