// The building blocks make_plan() assembles plans from (internal to
// lib/collectives). Each appends its steps to a Plan whose world_size,
// count and parts are already set.
#pragma once

#include "collectives/plan.hpp"

namespace distlab::collectives::detail {

// One transfer of the whole buffer (chunk -1).
Transfer whole_buffer(const Plan& plan, int src, int dst, bool reduce);
// Chunks [first, first + chunks) of plan.parts, which are contiguous.
Transfer chunk_block(const Plan& plan, int src, int dst, int first, int chunks, bool reduce);
// Appends `step` without its empty transfers; a step left empty is dropped.
void add_step(Plan& plan, Step step);

// plan_rooted.cpp: the root talks to everyone, or a binomial tree.
void add_sequential_broadcast(Plan& plan, int root);
void add_tree_broadcast(Plan& plan, int root);
void add_sequential_reduce(Plan& plan, int root);
void add_tree_reduce(Plan& plan, int root);

// plan_ring.cpp: p - 1 steps each, chunks of p.
void add_ring_reduce_scatter(Plan& plan);
void add_ring_all_gather(Plan& plan);

// plan_halving_doubling.cpp: the whole all-reduce.
void add_halving_doubling_all_reduce(Plan& plan);
// plan_all_to_all.cpp: p - 1 steps of one message per rank (plan.counts set).
void add_pairwise_exchange(Plan& plan);

// The largest power of two <= p (p >= 1).
int power_of_two_floor(int p);

}  // namespace distlab::collectives::detail
