// What a capstone checkpoint holds for one stage, and getting it back.
//
//   model             the stage's parameters and buffers by full name
//   tensors           "best/<name>": the best model so far (by validation
//                     loss); "rng/cpu": the CPU generator (dropout)
//   ints              epoch (the one to run next, 1-based), data_position
//                     (its next batch), step (global steps done)
//   reals             scheduler/lr, optimizer/lr, best_valid_loss
//
// Plain SGD without momentum keeps no state beyond its learning rate, and
// StepLR's state is the epoch. With thread ranks all ranks share one
// generator, so dropout masks depend on the threads' interleaving: bit-equal
// resumes need processes (gloo, nccl) or dropout 0.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

#include "checkpoint/checkpointer.hpp"

namespace distlab::train {

// The best model's tensors in a part: "best/" + the tensor's name.
inline const std::string kBestPrefix = "best/";

struct TrainerState {
  int64_t epoch = 1;          // next epoch to run
  int64_t data_position = 0;  // its next batch
  int64_t step = 0;           // global steps done
  double lr = 0;
  double best_valid_loss = 0; // +inf before the first evaluation
  double loss_scale = 0;      // the loss scaler's scale (0: no scaler)
  int64_t loss_scale_clean_steps = 0;  // and its clean steps in a row
  std::map<std::string, at::Tensor> best;  // the best model's tensors (empty before)
};

checkpoint::CheckpointPart to_part(const std::map<std::string, at::Tensor>& model, const TrainerState& state,
                       const std::string& written_by);
// Fills `state` and returns the model tensors; restores the CPU generator.
std::map<std::string, at::Tensor> from_part(const checkpoint::CheckpointPart& part, TrainerState& state);

}  // namespace distlab::train
