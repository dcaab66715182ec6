// The parallel plan: how a job's ranks share the training of one model, in
// one object that the trainer, lesson 11 and the tests all ask.
//
// It owns, for every parallelism the trainer composes:
//   the dimensions   data x pipeline x context x tensor (layout.hpp): rank
//                    <-> place and the groups along each axis;
//   the stages       which of the schedule's P * v stages each pipeline rank
//                    holds: v = 1, one each; looped (Interleaved 1F1B,
//                    LoopedBFS, interleaved zero bubble): rank r holds r,
//                    r + P, ...; in a V (ZBV, DualPipeV): r and 2P - 1 - r;
//   the context      how each sequence is split over the C context ranks
//                    (contiguous or zigzag chunks) and attended (ring,
//                    all-gather, naive, Ulysses);
//   the experts      a model whose feed-forwards are mixtures of experts:
//                    every rank holds all E of its stage's layers, or with
//                    expert parallelism N the experts spread over expert
//                    groups of N replicas (E/N each), the ranks holding the
//                    same experts averaging their gradients;
//   the strategy     how a stage's replicas share it: DDP (each holds all
//                    and all-reduces the gradients), or ZeRO-1/2/3 (each
//                    owns 1/R of the optimizer state, then of the
//                    gradients, then of the parameters);
//   the rules        every combination refused, each with its reason and
//                    the fix (refusals(): one function, each rule tested);
//   the description  the lines lesson 11 prints before it trains.
//
// A next dimension joins in layout.hpp (its axis, size, place and group)
// and here (its rules, its line in describe()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "context_parallel/context_attention.hpp"
#include "context_parallel/ring_plan.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "models/moe_options.hpp"
#include "pipeline/schedule.hpp"
#include "train/layout.hpp"

namespace distlab::train {

struct PlanOptions {
  Layout layout;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::k1F1B;
  int stages_per_rank = 1;  // v: the model is cut into P * v stages
  int64_t microbatches = 8;  // m: per step and replica
  int zero = 0;             // the data-parallel strategy: 0 DDP, 1..3 ZeRO-1..3
  int64_t layers = 0;       // the model's layers (0: not known yet, not checked)
  int64_t batch_size = 0;   // the columns of a step, all replicas together (0: not checked)
  // The context dimension (layout.context C > 1): how each sequence is
  // split and attended (context_parallel/context_attention.hpp).
  context_parallel::Layout context_layout = context_parallel::Layout::kZigzag;
  context_parallel::Method context_method = context_parallel::Method::kRing;
  int64_t heads = 0;        // the model's attention heads (0: not checked)
  int64_t ffn = 0;          // the model's feed-forward width (0: not checked)
  bool causal = true;       // the model's attention
  double dropout = 0;       // the model's
  models::MoeFeedForwardOptions moe;  // the model's experts (0: dense)
  int expert_parallel = 1;  // N: each stage's experts spread over N of its replicas
  // What each layer recomputes in the backward (memory/recompute.hpp): on
  // data and pipeline ranks; tensor and context ranks run layers of their
  // own, which keep everything.
  memory::Recompute recompute = memory::Recompute::kNone;
  // The products' precision (memory/precision.hpp), the loss scaler, and a
  // step with an inf injected (needs the scaler).
  memory::Precision precision = memory::Precision::kFp32;
  bool loss_scaling = false;
  int64_t inject_overflow_at_step = -1;
};

// What a rank does besides training, by its place: the plan decides.
struct Roles {
  // Prints the log: tensor and context rank 0 (the others of those groups
  // would print the same lines).
  bool prints = false;
  // Takes part in gathering its stage's state for a checkpoint: context
  // rank 0 of replicas 0 .. N-1 (N: the ranks the experts are spread over),
  // every tensor rank of them (the state is cut across the tensor group).
  bool gathers_checkpoint = false;
  // Writes its stage's part: replica, tensor and context rank 0.
  bool writes_checkpoint = false;
};

class ParallelPlan {
 public:
  explicit ParallelPlan(PlanOptions options) : o_(std::move(options)) {}

  const PlanOptions& options() const { return o_; }
  const Layout& layout() const { return o_.layout; }
  int stages() const { return o_.layout.pipeline * o_.stages_per_rank; }  // P * v
  std::string strategy() const;  // "DDP", "ZeRO-1", ...
  // Whether a rank waits for other ranks in the middle of its backward:
  // tensor and context ranks' collectives, experts' all-to-all, ZeRO-3's
  // gathers (DDP, ZeRO-1/2 and pipelines wait only once it is done).
  bool waits_inside_backward() const;
  // The refusal for ranks whose backwards share an autograd engine thread
  // (comm::Communicator::shares_engine_thread), or "" when this plan can.
  std::string refusal_on_a_shared_engine_thread() const;

  // Every rule this plan breaks, each a sentence with its reason and the
  // fix; empty when it can run. No communication: every rank finds the same.
  std::vector<std::string> refusals() const;
  // Throws std::invalid_argument with the first refusal (the schedule's own
  // rules as the pipeline::ScheduleError make_schedule throws).
  void check() const;

  Place place_of(int world_rank) const { return train::place_of(world_rank, o_.layout); }
  Roles roles_of(const Place& place) const;
  int rank_of(const Place& place) const { return train::rank_of(place, o_.layout); }
  Groups make_groups(comm::Communicator& world) const { return train::make_groups(world, o_.layout); }

  // The pipeline rank holding each of the P * v stages, and the stages
  // pipeline rank `rank` holds, in stage order.
  int rank_of_stage(int stage) const;
  std::vector<int> stages_held(int pipeline_rank) const;

  // What lesson 11 prints: the groups along each axis, and with v > 1 the
  // stages each pipeline rank holds.
  std::vector<std::string> describe() const;

 private:
  PlanOptions o_;
};

}  // namespace distlab::train
