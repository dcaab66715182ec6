// Broadcast and reduce: the root talks to each rank in turn, or a binomial
// tree.
//
// Ranks are renumbered relative to the root (v = (r - root) mod p) so that
// every tree looks like the root-0 tree. For p = 8, root 0:
//
//   tree broadcast, the informed set doubles:   tree reduce, pairs of neighbours first:
//     step 0: 0->1                                step 0: 1->0 3->2 5->4 7->6
//     step 1: 0->2 1->3                           step 1: 2->0 6->4
//     step 2: 0->4 1->5 2->6 3->7                 step 2: 4->0
//
// ceil(log2 p) steps each; the sequential versions take p - 1.
#include "collectives/plan_builders.hpp"

namespace distlab::collectives::detail {
namespace {

// The real rank of relative rank v.
int real_rank(int v, int root, int p) { return (v + root) % p; }

}  // namespace

void add_sequential_broadcast(Plan& plan, int root) {
  const int p = plan.world_size;
  for (int v = 1; v < p; ++v) add_step(plan, {"broadcast", {whole_buffer(plan, root, real_rank(v, root, p), false)}});
}

void add_tree_broadcast(Plan& plan, int root) {
  const int p = plan.world_size;
  // Ranks v < distance hold the data and each tells the rank `distance` away.
  for (int distance = 1; distance < p; distance *= 2) {
    Step step{"broadcast", {}};
    for (int v = 0; v < distance && v + distance < p; ++v)
      step.transfers.push_back(whole_buffer(plan, real_rank(v, root, p), real_rank(v + distance, root, p), false));
    add_step(plan, std::move(step));
  }
}

void add_sequential_reduce(Plan& plan, int root) {
  const int p = plan.world_size;
  for (int v = 1; v < p; ++v) add_step(plan, {"reduce", {whole_buffer(plan, real_rank(v, root, p), root, true)}});
}

void add_tree_reduce(Plan& plan, int root) {
  const int p = plan.world_size;
  // Ranks whose lowest set bit is `distance` have summed their subtree and
  // hand it to the rank `distance` below; then they are done.
  for (int distance = 1; distance < p; distance *= 2) {
    Step step{"reduce", {}};
    for (int v = distance; v < p; v += 2 * distance)
      step.transfers.push_back(whole_buffer(plan, real_rank(v, root, p), real_rank(v - distance, root, p), true));
    add_step(plan, std::move(step));
  }
}

}  // namespace distlab::collectives::detail
