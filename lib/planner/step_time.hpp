// A training step's time, predicted for one layout from the sizes and a
// machine's profile (profile.hpp), no model run.
//
//   compute   each pipeline action's seconds on one rank: every matrix
//             product's FLOPs over the profile's throughput at its shape
//             and precision, every element-wise operation's bytes over
//             the element-wise bandwidth, and a fixed cost per operation
//             (profile.op_seconds x the operations a layer dispatches);
//             the backward twice the forward's products, the recomputed
//             part of the forward once more (memory/flops.hpp's HFU)
//   messages  each activation and gradient between stages, and each
//             tensor-parallel all-reduce and context exchange inside a
//             layer not measured cut (added to the action that waits for
//             it), from the alpha-beta cost model (collectives/cost_model.hpp) with the
//             profile's link
//   schedule  the pipeline simulator (pipeline/simulator.hpp) composes
//             the actions: its makespan is the critical path, its idle
//             fraction the bubble
//   averaging DDP all-reduces its buckets during the last microbatch's
//             backward: all but the last bucket's hidden behind it;
//             ZeRO-1 reduce-scatters and all-gathers after the step
//             (nothing hidden), ZeRO-2 reduce-scatters during it as DDP
//             does, ZeRO-3 also gathers each unit twice per microbatch
//   cores     ranks that outnumber the cores share them (shared_cores.hpp):
//             the schedule played again with every rank that has work
//             running at the speed the profile measured for that many
//             busy ranks (the R x C x T pipelines step together), so a
//             rank waiting in a bubble lends its core and the bubble is
//             not idle time; what follows the backward on every rank at
//             once; the messages and collectives as measured among that
//             many busy ranks
//   compute   with the profile's pieces (pieces.hpp): each stage's
//             embedding, layers and decoder as measured at the rank's
//             tokens on its intra-op threads; a cut layer (T tensor ranks,
//             1/C of each sequence) as measured on its own thread ranks
//             (cut_pieces.hpp), its messages and waits in it; without
//             pieces, added up
#pragma once

#include <cstdint>
#include <string>

#include "collectives/plan.hpp"
#include "planner/model_shape.hpp"
#include "planner/profile.hpp"

namespace distlab::planner {

struct StepPrediction {
  double step_s = 0;        // the prediction
  double pipeline_s = 0;    // the simulated pipeline's makespan
  double critical_s = 0;    // the schedule on shared cores, plus after_s: the prediction
  double after_s = 0;       // what averaging, the norm and the optimizer add after it (the slowest pipeline rank's)
  double packed_s = 0;      // every rank's work over the cores (a bound, shown beside it)
  double bubble = 0;        // the schedule's idle fraction (simulated), as on ranks of their own
  double busy_s = 0;        // one pipeline's busiest rank's compute
  int64_t wire_bytes = 0;   // bytes every rank together sends in a step
  double model_flops = 0;   // 6N + 12Lsd per token, the step's tokens
  double mfu = 0;           // model FLOPs / step_s over the cores' (or device's) peak matmul rate
};

// The backend the profile's ranks talk through: "threads" (thread ranks)
// on a CPU, "nccl" on GPUs.
std::string ranks_backend(const Profile& profile);

// `backend`: the name in the profile's links ("": ranks_backend's).
StepPrediction predict_time(const ModelShape& model, const Choice& choice, const Profile& profile,
                            const std::string& backend = "");

// Seconds of `collective` over `ranks` ranks of `bytes` bytes each: the
// profile's own measurement of it when it has one, else the ring algorithm
// (collectives/plan.hpp) over its point-to-point link, by the cost model;
// as measured among `world` busy ranks (0: the group alone).
double collective_seconds(const Profile& profile, const std::string& backend, collectives::Collective collective,
                          int ranks, int64_t bytes, int world = 0);

// Whether the step's compute comes from the profile's measured pieces:
// they were measured on this model, in this precision and policy.
bool uses_pieces(const Profile& profile, const ModelShape& model, const Choice& choice);

// The intra-op threads each rank runs on, as lesson 11 chooses them for
// `world` thread ranks (comm/intra_op_threads.hpp): the cores shared out.
int threads_per_rank(const Profile& profile, int world);

// Seconds of one forward of stage `stage` on one rank for one microbatch
// of `columns` columns, and of its backward (recomputation included).
struct StageSeconds {
  double forward = 0, backward = 0;
  // The backward split as zero-bubble schedules run it: I the input's
  // gradient (the pieces' measured I, or half the backward without them;
  // empty on the first stage, which returns none), W the whole backward
  // again (autograd walks every node between the loss and the parameters).
  double backward_input = 0, backward_weight = 0;
};
StageSeconds stage_seconds(const ModelShape& model, const Choice& choice, const Profile& profile,
                           const std::string& backend, int stage, int64_t columns);

}  // namespace distlab::planner
