// Going on with the ranks there are: a job that lost ranks (or got them
// back) restarts on another world size, picks a layout for it, and resumes
// from a checkpoint that another layout wrote.
//
//   fit_layout   the layout for the world it has: the stages it was asked
//                for when the world divides by them (the model is cut the
//                same way, each stage's checkpoint part loads as it is),
//                else the most stages up to that which do divide it; the
//                rest of the ranks are replicas. 2 x 2 that lost two ranks
//                goes on as 2 x 1; 1 x 4 that lost one as 1 x 3; 2 x 2 on 3
//                ranks as 1 x 3. A tensor size T is kept: whole tensor
//                groups are laid out the same way (2 x 2 x 2 on 6 ranks:
//                1 x 3 x 2).
//   recut        a checkpoint written by S stages, for a stage of another
//                cut: the parts' names are the whole model's (flat, the same
//                whatever the split), so their union is the whole model and
//                each new stage takes the names it has. The best model
//                ("best/<name>") is cut the same way.
//
// The data needs nothing: replicas split each batch's columns among
// themselves (data::replica_columns, evenly or not), so whatever the
// layout, step k trains on the batch one process would, and a checkpoint's
// step and data position mean the same on any layout.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.hpp"
#include "train/layout.hpp"

namespace distlab::train {

struct FittedLayout {
  Layout layout;
  std::string reason;  // one line: what was chosen and why
  std::string why;     // the why alone: "the 2 stages kept, the replicas follow the world"
};

// `max_stages`: the most stages the model can be cut into (its layers).
// Throws std::invalid_argument when world_size < 1 or does not divide by
// wanted.tensor.
FittedLayout fit_layout(int world_size, const Layout& wanted, int max_stages);

// One part for a stage holding `names` (its parameters and buffers), from
// every part of a checkpoint (stage order). Counters and texts come from
// stage 0's part; the generator state from `rng_from`'s (or stage 0's).
// Throws CheckpointError naming the first of `names` no part holds.
checkpoint::CheckpointPart recut(const std::vector<checkpoint::CheckpointPart>& parts, const std::set<std::string>& names, int rng_from);

}  // namespace distlab::train
