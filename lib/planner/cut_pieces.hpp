// A layer cut as the capstone cuts it, timed on as many thread ranks as the
// cut has: over a tensor group (train/cut_layers.hpp: heads and
// feed-forward split, an all-reduce after each region), with each
// sequence split over a context group (train/context_split.hpp: the
// attention core a ring of C steps, a transfer at each), or both (T x C
// ranks: tensor groups of consecutive ranks, context groups across them). What it measures
// holds the messages, the waits for the slowest rank and the ring's small
// operations, which a layer's products over the throughput and the cost
// model's messages leave out (a context layer on 4 ranks ran about five
// times what they add up to).
//
// Measured in fp32, per recomputation policy a cut layer allows (none,
// full, selective: the plan refuses matmuls with a cut), at 1, 4 and 20
// columns of the preset's sequence, one intra-op thread per rank; the
// slowest rank's median of 5 runs after one untimed, the backward also
// split as zero-bubble schedules run it. Alone (T x C ranks) and as 2, 4,
// ... copies at once up to the largest world, as a layout's other
// replicas and stages run beside it: a rank that waits for a message
// waits longer for a core when more ranks share them. Ranks that
// outnumber the cores share them while measured: the prediction takes
// that sharing out (step_time.hpp), and its replay of the schedule on
// shared cores puts back the sharing of the ranks busy then.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "planner/model_shape.hpp"
#include "planner/profile.hpp"

namespace distlab::planner {

// The cuts to measure for `model` up to `max_ranks` ranks: T x C > 1, T a
// power of 2 dividing its heads and feed-forward width (1 too), C a power
// of 2: every cut of a layout on 2, 4, 8, ... ranks. (A layout on 3, 5, 6
// or 7 ranks has cuts of 3 and more; the prediction adds those up.)
std::vector<Cut> cuts_of(const ModelShape& model, int max_ranks);

// Adds a PiecePoint per cut, policy and size to `profile` (fp32, 1 thread);
// `say`: one line per cut.
void measure_cut_pieces(const ModelShape& model, int max_ranks, Profile& profile,
                        const std::function<void(const std::string&)>& say);

}  // namespace distlab::planner
