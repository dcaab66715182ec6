// Checkpoints that survive a crash at any moment, with every pipeline stage
// writing its own part, and a model part that Python's torch.load reads as a
// state_dict.
//
// On disk, one folder per checkpoint, named by the training step it holds:
//
//   DIR/step_000000120/
//     stage0.model.pt   torch.load -> {"fc1.weight": tensor, ...}: stage 0's
//                       parameters and buffers by full name (a state_dict)
//     stage0.state.pt   torch.load -> {"tensors": {...}, "ints": {...},
//                       "reals": {...}, "texts": {...}}: optimizer state,
//                       RNG states (uint8 tensors), epoch, step, data
//                       position, scheduler state
//     stage0.manifest   text, written last: step, "stage 0 of 2", each
//                       file's size and CRC-32, and the manifest's own CRC-32
//     stage1.model.pt   ... the same for every other stage
//
// Both .pt files are torch::pickle_save output, Python's torch.save format,
// with every tensor on the CPU (GPU tensors are copied off when saved).
// The stages' parameter names are disjoint, so the whole model is the union
// of the parts:  sd = {}; [sd.update(torch.load(f)) for f in glob("stage*.model.pt")]
// (one stage: torch.load("stage0.model.pt") is the model's state_dict).
//
// Who writes: one rank per stage (replica 0 of each stage); the others only
// read. Every file is written atomically (checkpoint/files.hpp) and the
// manifest goes last, so a part is either whole and checked or missing. A
// checkpoint is complete when the manifest of every stage 0..num_stages-1
// is there, and every file has its size and CRC-32. The writer of stage 0
// keeps the newest `keep_last` complete checkpoints and removes the folders
// older than those (partial folders included); no other writer deletes.
//
// Loading checks again: a truncated or bit-flipped file is refused with one
// line naming the file and what is wrong, and latest_complete() goes back
// to the newest checkpoint that passes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::checkpoint {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What one stage saves and gets back, bit for bit.
struct CheckpointPart {
  std::map<std::string, at::Tensor> model;    // parameters and buffers by full name
  std::map<std::string, at::Tensor> tensors;  // e.g. "optimizer/momentum/fc1.weight", "rng/data" (uint8)
  std::map<std::string, std::int64_t> ints;   // e.g. "epoch", "step", "data_position"
  std::map<std::string, double> reals;        // e.g. "scheduler/lr"
  std::map<std::string, std::string> texts;
};

// Called with one line for each newer checkpoint that is skipped.
using Report = std::function<void(const std::string& line)>;

class Checkpointer {
 public:
  // `dir` is created when missing. num_stages >= 1, keep_last >= 1.
  Checkpointer(std::string dir, int num_stages = 1, int keep_last = 3);

  // Writes `part` as stage `stage` of the checkpoint of `step` and returns
  // its folder. The writer of stage 0 then prunes old checkpoints.
  std::string save(std::int64_t step, int stage, const CheckpointPart& part) const;

  // The newest step whose checkpoint is complete, reporting each newer one
  // that is not, with the reason; nullopt when there is none.
  std::optional<std::int64_t> latest_complete(const Report& report = {}) const;

  // Stage `stage` of step `step`, checksums verified. Throws CheckpointError
  // with one line when it is missing, truncated or corrupt.
  CheckpointPart load(std::int64_t step, int stage) const;

  // Why the checkpoint of `step` cannot be used, or "" when it is complete.
  std::string problem(std::int64_t step) const;

  // The stage count of the job that wrote `step` (its stage 0 manifest),
  // or nullopt when that manifest is missing or unreadable.
  std::optional<int> stages_of(std::int64_t step) const;
  // A job that goes on with another layout (elastic.hpp) reads checkpoints
  // written by any stage count: problem(), latest_complete() and load()
  // then check each against its own count, not this job's. Off: a part
  // of another count is refused ("resume with the same pipeline layout").
  void accept_any_stage_count(bool accept) { any_stage_count_ = accept; }

  // Every step with a folder, newest first.
  std::vector<std::int64_t> steps() const;

  const std::string& dir() const { return dir_; }
  int num_stages() const { return num_stages_; }
  int keep_last() const { return keep_last_; }
  std::string folder(std::int64_t step) const;
  std::string model_file(std::int64_t step, int stage) const;
  std::string state_file(std::int64_t step, int stage) const;
  std::string manifest_file(std::int64_t step, int stage) const;

 private:
  void prune() const;
  int stage_count_of(std::int64_t step) const;  // this job's, or (accept_any_stage_count) the writer's

  std::string dir_;
  int num_stages_;
  int keep_last_;
  bool any_stage_count_ = false;
};

}  // namespace distlab::checkpoint
