// The DDP + Pipe tutorial's training loop on P pipeline stages x
// R data-parallel replicas (layout.hpp, plan.hpp), each stage kept equal
// among its replicas by DDP, or with plan.data.zero 1, 2 or 3 by ZeRO within
// the replica group (data_parallel.hpp).
// With layout.tensor T > 1 each stage's layers are cut across T ranks
// (cut_layers.hpp) and DDP averages each cut among the replicas: P x R x T
// ranks, three dimensions. With layout.context C > 1 every sequence is
// split over C ranks as well (each keeps its chunks of the batch's rows,
// the end of a sequence that does not split padded with targets that count
// for nothing), each rank's loss is its tokens' share of the whole batch's
// mean, and DDP averages over data x context: P x R x C x T ranks. Checkpoints, the best model and the digest hold
// the unsplit model whatever T is (stage_model.hpp's RankStage).
//
//   per epoch:  train on batches_per_epoch batches (lr from StepLR),
//               evaluate on the validation split, keep the best model,
//               StepLR step, checkpoint
//   at the end: test loss of the best model, digest of the final parameters
//
// What it does differently from the tutorial, on purpose (README of lesson 11):
//   - the model is causal (options.causal): the tutorial passes no mask, so
//     its LM sees the token it is asked to predict;
//   - logits (S, N, V) and targets (S, N) are aligned position by position;
//     the tutorial compares its (N, S, V) output, flattened n-major, with
//     targets flattened s-major;
//   - evaluate() returns the true mean loss over the tokens it evaluated;
//     the tutorial divides a 50-batch sum by the whole split's length;
//   - the training columns are split among replicas (data::ReplicaSplit::
//     kColumns), so a run on R replicas sees the batches one process sees.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "data/corpus.hpp"
#include "memory/loss_scaler.hpp"
#include "memory/precision.hpp"
#include "models/transformer_lm.hpp"
#include "pipeline/schedule.hpp"
#include "train/data_parallel.hpp"
#include "train/elastic.hpp"
#include "train/layout.hpp"
#include "train/plan.hpp"

namespace distlab::train {

// The model trained: a preset (models::transformer_lm_preset) and what is
// changed of it.
struct ModelChoice {
  std::string preset = "tiny";      // tiny, cpu, tutorial
  double dropout = -1;              // < 0: the preset's (0.2, the tutorial's)
  bool causal = true;
  int64_t layers = 0;               // > 0: the preset's model with this many layers instead
  int64_t heads = 0;                // > 0: ... and this many attention heads (they must divide d)
  // experts > 0: each layer's feed-forward a mixture of experts
  // (models/moe_feed_forward.hpp). The auxiliary losses join each
  // microbatch's backward with the microbatch's share of the step.
  models::MoeFeedForwardOptions moe;
};

// The loop: batches, optimizer, epochs, logging.
struct LoopOptions {
  int64_t batch_size = 20;          // columns of the training matrix, all replicas together
  int64_t eval_batch_size = 10;
  int64_t bptt = 35;
  double lr = 5.0;
  double gamma = 0.95;              // StepLR(step_size 1)
  double clip = 0.5;                // max norm of the whole model's gradient
  int64_t epochs = 3;
  int64_t batches_per_epoch = 50;   // 0: whole epochs
  int64_t eval_batches = 50;        // 0: the whole split
  int64_t log_interval = 10;
  uint64_t seed = 1234;
  int64_t stop_after_steps = -1;    // > 0: return after this many steps (an interruption, for tests)
  // Called on every rank after each training step (and its checkpoint, if
  // one was due) with the global step count; lesson 11's --kill-at-step
  // kills a rank from here.
  std::function<void(int64_t step)> after_step;
  bool keep_final_state = false;    // TrainResult::final_state
  bool quiet = false;               // no log lines
};

// Checkpoints (checkpoint/) and what a restarted job does with them.
struct CheckpointOptions {
  std::string dir;                  // empty: none
  int64_t every = 0;                // every epoch, and every N steps when N > 0
  int keep_last = 3;
  // Also automatic when the launcher restarted the job. A checkpoint holds
  // the unsplit model: a job resumes from one written by any other layout
  // (re-cut into this layout's stages).
  bool resume = false;
  // The layout follows the world's size (elastic.hpp's fit_layout, from
  // `plan.layout` as asked): a job that lost ranks goes on with the rest.
  bool elastic = false;
};

// Everything train() is told, by composition: the plan's options (layout,
// schedule, strategy, context, experts, memory: plan.hpp), the model's, the
// loop's and the checkpoints'. Each option lives in one of them, once.
struct TrainerOptions {
  PlanOptions plan;
  ModelChoice model;
  LoopOptions loop;
  CheckpointOptions checkpoints;
};

struct TrainResult {
  Layout layout;                     // the one trained on (elastic: fitted to the world)
  Place place;
  std::vector<double> step_losses;   // last stage: this replica's mean loss of each step run here (every context rank)
  std::vector<double> grad_norms;    // every rank: the whole model's norm before clipping, per step
  std::vector<double> step_seconds;  // every rank: wall time of each training step run here (batch to optimizer step)
  std::vector<double> loss_scales;   // every rank, with loss scaling: the scale each step's backward used
  std::vector<int64_t> skipped_steps;  // with loss scaling: the global steps skipped for an inf or NaN
  std::vector<double> valid_losses;  // per epoch (same on every rank)
  double best_valid_loss = 0;
  double test_loss = 0;              // of the best model; 0 when interrupted
  int64_t steps = 0;                 // global steps done (checkpointed ones included)
  int64_t resumed_from_step = -1;
  bool interrupted = false;          // stopped by stop_after_steps
  std::string digest;                // of the final parameters, all stages (model_digest.hpp)
  int64_t parameters = 0;            // the whole model's
  std::vector<DataParallelStats> data_parallel;  // each held stage's strategy: synced_steps one per step run here
  std::map<std::string, at::Tensor> final_state;  // this stage's parameters by full name (keep_final_state)
};

// v for a schedule when not told: 2 for those that hold several stages per
// rank (the looped ones, Interleaved 1F1B, LoopedBFS, interleaved zero
// bubble; the V ones, ZBV and DualPipeV, always 2), else 1.
int default_stages_per_rank(pipeline::ScheduleKind kind);

// The model the options describe: the preset for this vocabulary, causal or
// not, with the dropout, layer count, experts and recomputation asked for.
models::TransformerLmOptions model_options(const TrainerOptions& options, int64_t vocab_size);

// The layout train() trains on with `world_size` ranks: `options.layout`,
// or with `options.elastic` the one fit_layout (elastic.hpp) picks for the
// preset's layers, with its reason. The one place that decides it: a
// program that prints the layout before training asks here.
FittedLayout layout_for(int world_size, const TrainerOptions& options, int64_t vocab_size);

// The parallel plan the options describe (plan.hpp) for a corpus of
// `vocab_size` words: the plan's options as given (train() passes the
// fitted layout), checked against the model the options build and the
// loop's batch. train() checks it before any collective; lesson 11 prints it.
ParallelPlan plan_for(const TrainerOptions& options, int64_t vocab_size);

// Every rank of `world` calls it; `corpus` may be shared by thread ranks.
TrainResult train(comm::Communicator& world, const data::Corpus& corpus, const TrainerOptions& options);

}  // namespace distlab::train
