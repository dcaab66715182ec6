// The trainer's own state on one rank, inside lib/train: what the plan
// built for it (rank_build.hpp), the executor, the data, the checkpoints
// and the loss scaler, and the pieces of the loop, one file each:
//
//   trainer_step.cpp         one training step (loss scaling, clipping, SGD)
//   evaluation.cpp           the mean loss over a split
//   trainer_checkpoints.cpp  save and resume
//   trainer.cpp              setting up, the epochs, train()
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpointer.hpp"
#include "comm/communicator.hpp"
#include "memory/loss_scaler.hpp"
#include "pipeline/executor.hpp"
#include "train/pipeline_forward.hpp"
#include "train/rank_build.hpp"
#include "train/trainer.hpp"
#include "train/trainer_state.hpp"

namespace distlab::train {

struct Run {
  comm::Communicator& world;
  const TrainerOptions& o;
  RankBuild rank;  // groups, roles, stages, strategies
  std::unique_ptr<pipeline::PipelineExecutor> executor;  // one for all of this rank's stages
  std::optional<checkpoint::Checkpointer> checkpoints;
  at::Tensor train_data, valid_data, test_data;  // (rows, columns) int64, CPU
  std::optional<memory::LossScaler> scaler;      // TrainerOptions::loss_scaling
  double gradient_scale = 1;  // the executor's, before the loss scale
  double aux_loss_scale = 1;  // each layer's auxiliary losses' (experts), before the loss scale
  int64_t batch_rows = 0;     // the rows of the batch in flight before padding (context: the loss's denominator)

  // "[RANK r]: line" on stdout, by the ranks whose role is to print.
  void print(const std::string& line) const;
};

// A stage's forward in the options' precision (memory/precision.hpp); the
// backward, outside it, follows what the forward recorded (evaluation.cpp).
StageForward in_precision(StageForward forward, const Run& run);

// One training step on the whole batch (S, N) (trainer_step.cpp).
pipeline::StepResult train_step(Run& run, const at::Tensor& input, const at::Tensor& target, int64_t step_number,
                                TrainResult& result);
// The true mean loss over the first eval_batches batches of `source`, the
// same on every rank (evaluation.cpp).
double evaluate(Run& run, const at::Tensor& source);
// The checkpoint of `state`, written by the ranks whose role it is; every
// rank calls it (trainer_checkpoints.cpp).
void save(Run& run, const TrainerState& state);
// Every rank loads the newest complete checkpoint into `state` and the
// model. Returns its step, or -1 when there is none.
int64_t resume(Run& run, TrainerState& state);

}  // namespace distlab::train
