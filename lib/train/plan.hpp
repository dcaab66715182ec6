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
//                    the fix (refusals(): each dimension's, dimensions.hpp);
//   the description  the lines lesson 11 prints before it trains.
//
// A next dimension joins in layout.hpp (its axis, size, place and group),
// here (its options struct, one field of PlanOptions) and in dimensions.cpp
// (one entry: its rules and its lines of the description).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "context_parallel/context_attention.hpp"
#include "context_parallel/ring_plan.hpp"
#include "memory/loss_scaler.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "models/moe_options.hpp"
#include "pipeline/schedule.hpp"
#include "train/layout.hpp"

namespace distlab::models {
struct TransformerLmOptions;
}  // namespace distlab::models

namespace distlab::train {

// Each dimension's own options; its size is the layout's (layout.hpp).
// dimensions.hpp lists each one's rules and description lines, once.

// --pipeline P: the schedule, v and m.
struct PipelineOptions {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::k1F1B;
  // v: stages each pipeline rank holds, the model cut into P * v stages and
  // placed as the schedule says (looped, as Interleaved 1F1B: rank r holds
  // r, r + P, ...; in a V, as ZBV: r and 2P - 1 - r).
  int stages_per_rank = 1;
  // m: microbatches per step and replica; the plan runs at most the columns
  // of the smallest replica (ParallelPlan::microbatches()).
  int64_t microbatches = 8;
};

// --replicas R: how a stage's replicas share it. 0: DDP all-reduces the
// gradients; 1, 2, 3: ZeRO-1 / ZeRO-2 / ZeRO-3 shard the optimizer state,
// then the gradients, then the parameters, within the replica group
// (data_parallel.hpp).
struct DataOptions {
  int zero = 0;
};

// --context C: how each sequence is split over the C ranks and attended
// (context_parallel/context_attention.hpp); the gradients average over
// data x context.
struct ContextOptions {
  context_parallel::Layout layout = context_parallel::Layout::kZigzag;
  context_parallel::Method method = context_parallel::Method::kRing;
};

// A model with experts (ModelFacts::moe): N > 1 spreads each stage's
// experts over expert groups of N of its replicas (borrowed from the
// data-parallel dimension, as torchtitan and DeepSpeed do), E/N per rank,
// exchanged by all-to-all; their gradients summed over the ranks holding
// the same experts and divided by R.
struct ExpertOptions {
  int parallel = 1;
};

// The memory levers: what each layer recomputes in its backward
// (memory/recompute.hpp; on data and pipeline ranks: tensor and context
// ranks run layers of their own, which keep everything), the products'
// precision (memory/precision.hpp; parameters, gradients and the optimizer
// stay float32; fp16 needs CUDA), and the dynamic loss scaler
// (memory/loss_scaler.hpp): the loss multiplied by its scale for the
// backward, the gradients divided back before clipping, a step whose
// gradients hold an inf or a NaN skipped and the scale backed off. fp16
// needs it; with fp32 and bf16 it changes no bit (powers of 2).
struct MemoryOptions {
  memory::Recompute recompute = memory::Recompute::kNone;
  memory::Precision precision = memory::Precision::kFp32;
  bool loss_scaling = false;
  memory::LossScalerOptions loss_scaler;
  // > 0: at this step replica 0's backward starts from an infinite seed
  // (needs loss_scaling): its gradients overflow before they are averaged,
  // as a scale too large for float16 makes them; the step is skipped on
  // every rank and the scale backs off, visibly.
  int64_t inject_overflow_at_step = -1;
};

// How the job's ranks share the training: the layout's sizes and each
// dimension's options. The tensor dimension has no options but its size.
struct PlanOptions {
  Layout layout;
  PipelineOptions pipeline;
  DataOptions data;
  ContextOptions context;
  ExpertOptions experts;
  MemoryOptions memory;
};

// What the plan checks of the model it is for and of its batch (0: not
// known, not checked): the trainer fills it from the model it builds
// (trainer.hpp's plan_for).
struct ModelFacts {
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t ffn = 0;          // the feed-forward width
  bool causal = true;
  double dropout = 0;
  models::MoeFeedForwardOptions moe;  // experts > 0: each layer's feed-forward a mixture of experts
  int64_t batch_size = 0;   // the columns of a step, all replicas together
};
// The facts of `model` trained on `batch_size` columns a step.
ModelFacts model_facts(const models::TransformerLmOptions& model, int64_t batch_size);

// What a rank does besides training, by its place: the plan decides.
struct Roles {
  // Prints the log: tensor and context rank 0 (the others of those groups
  // would print the same lines).
  bool prints = false;
  // Takes part in gathering its stage's state for a checkpoint: the ranks
  // of the stage's first expert group, averaging ranks (replica * C +
  // context) 0 .. N-1 (N: the ranks the experts are spread over; 1: replica
  // and context rank 0), every tensor rank of them (the state is cut
  // across the tensor group).
  bool gathers_checkpoint = false;
  // Speaks for its stage: writes the stage's part of a checkpoint and
  // prints the stage's own lines (where it resumed from, that it stopped):
  // replica, tensor and context rank 0.
  bool speaks_for_stage = false;
};

class ParallelPlan {
 public:
  explicit ParallelPlan(PlanOptions options, ModelFacts model = {});

  const PlanOptions& options() const { return o_; }
  const ModelFacts& model() const { return model_; }
  const Layout& layout() const { return o_.layout; }
  int stages() const { return o_.layout.pipeline * o_.pipeline.stages_per_rank; }  // P * v
  // m as every replica runs it: as asked, at most the columns of the
  // smallest replica (ZeRO-3 gathers each unit once per microbatch, so the
  // replicas of a stage agree on m even when their columns do not).
  int64_t microbatches() const { return microbatches_; }
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
  ModelFacts model_;
  int64_t microbatches_;
};

}  // namespace distlab::train
