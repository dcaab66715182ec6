// Measures this machine into a profile (profile.hpp): what `distlab-plan
// calibrate` runs. Short by default (about a minute on 2 cores), with
// a line of progress per part.
//
//   matmul       (m x k)(k x n) products on one thread (a thread rank's
//                share: lesson 11 sets one intra-op thread per rank), m the
//                microbatches' tokens (35 x 1, 2, 4, 10, 20 columns), k x n
//                the layers' products (d x 3d, d x d, d x f, f x d, their
//                cuts over 2 and 4 tensor ranks, the attention core's
//                d/a x s, the decoder's d x V), in fp32 and bf16: the best
//                of a few timed runs after one untimed
//   elementwise  an add of two 4 MB tensors: 12 MB moved
//   op           an add of two 16-element tensors: what an operation costs
//                whatever its size
//   pieces       the model's embedding, one layer per recomputation
//                policy, and decoder with its loss, forward and backward,
//                as the capstone runs them (pieces.hpp), on one thread and
//                on every core; each piece's clipping and SGD step
//   cut layers   a layer cut over T tensor x C context thread ranks, every
//                cut up to 8 ranks, run on them at once (cut_pieces.hpp)
//   links        thread ranks: ping-pong (collectives/calibrate.hpp) and
//                the backend's all-reduce, all-gather and reduce-scatter at
//                a small and a large size over 2, 4 and 8 ranks, each also
//                while other threads compute (the rest of a world of up to
//                8 ranks): alpha, beta
//   sharing      k threads each running a layer's forward and backward at
//                once, k = 1, 2, 4, 8, in fp32 and in bf16: how much slower
//                each runs than one alone (on 2 cores, 8 ranks share them:
//                about 5; a rank that waits gives its core to the others)
#pragma once

#include <functional>
#include <string>

#include "planner/model_shape.hpp"
#include "planner/profile.hpp"

namespace distlab::planner {

struct CalibrationOptions {
  double seconds_per_point = 0.01;  // timed per measurement, at least
  int max_ranks = 8;                // links and sharing up to this many ranks
  bool bf16 = true;
  // Links and sharing are measured this many times, spread over the
  // calibration, each point's median kept (at least 2).
  int rounds = 3;
};

// `say`: one line of progress per part. `model`: the shapes to measure.
Profile calibrate(const ModelShape& model, const CalibrationOptions& options,
                  const std::function<void(const std::string&)>& say);

// The date (YYYY-MM-DD), the host's name, this LibTorch's version.
std::string today();
std::string machine_name();
std::string libtorch_version();

}  // namespace distlab::planner
