// Sharded checkpoints for ZeRO: every rank writes only what it owns, and
// any number of ranks can read them back, each taking its new shard.
//
//   zero::ShardedCheckpointer checkpoints("ckpt");
//   checkpoints.save(step, zero1, *model);        // every rank of the group
//   ...                                            // later, on q ranks (any q)
//   checkpoints.load(step, zero3);                 // any stage: the format is the same
//
// On disk, through lib/checkpoint's Checkpointer (atomic files, CRC-32 in a
// manifest written last), one "stage" per writing rank w of p:
//
//   DIR/step_000000003/
//     stage0.model.pt    torch.load -> the whole model's state_dict (rank 0
//                        writes it: ZeRO-3 gathers it with full_parameters())
//     stage<w>.model.pt  w > 0: an empty dict
//     stage<w>.state.pt  torch.load -> {"tensors", "ints", "reals", "texts"}:
//       texts  "zero/parameters"  every parameter, registration order: "name\tshape\tdtype"
//              "zero/buckets"     the writer's buckets (ZeRO-3: units), one line each,
//                                 parameter indices in packing order
//              "zero/stage", "zero/optimizer" ("ZeRO-1", "adam" | "adamw" | "sgd")
//       ints   "zero/writers" p, "zero/rank" w, "optimizer/has_state" 0 | 1,
//              "optimizer/step" (Adam's step count), "shard/<name>/offset"
//       tensors "shard/<name>"  (length,) the parameter's elements
//                               [offset, offset + length) of its flattened values
//               "optimizer/<field>/<name>" the same elements of the optimizer's
//                               state: exp_avg, exp_avg_sq (max_exp_avg_sq with
//                               amsgrad) for Adam/AdamW, momentum_buffer for SGD
//     stage<w>.manifest  each file's size and CRC-32
//
// A writer's shard is stored as segments of named parameters
// (shard_segments.hpp), so nothing in it depends on the buckets or on p
// except which elements it holds, and the buckets are written down.
//
// Loading on q ranks, each rank r:
//   1. reads one writer's part (the one whose shard is likely to overlap
//      its own: r * p / q), checks the parameter list against this model
//      (the first difference is named) and rebuilds the writers' layout
//      from "zero/buckets" and p;
//   2. computes its own segments under its own layout, and the writers
//      whose segments overlap them; reads those parts only, each CRC-checked
//      by the Checkpointer (a truncated or corrupt file: one line naming it),
//      and checks that each holds exactly the segments its layout says;
//   3. copies every overlap into its chunks and their optimizer state,
//      checking that every element of its shard was covered;
//   4. agrees with the other ranks (one all-reduce) that all of them read
//      their parts: if any failed, every rank throws (the failing ones naming
//      the file, the others naming the failing ranks) before anything in the
//      model changed;
//   5. ZeRO-1/2: all-gathers the parameters (the chunks are views of them);
//      ZeRO-3: the next forward gathers them.
// Buffers and frozen parameters are not sharded: they come from stage0.model.pt.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpointer.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

namespace distlab::zero {

class ShardedCheckpointer {
 public:
  // `dir` is created when missing; the newest `keep_last` complete
  // checkpoints are kept (checkpoint::Checkpointer's rule).
  explicit ShardedCheckpointer(std::string dir, int keep_last = 3);

  // Every rank of the group calls it between steps, with the model the
  // stage was built on. Returns the folder once every rank's part is
  // written; throws on every rank if any rank could not write.
  std::string save(std::int64_t step, Zero1& zero, torch::nn::Module& model) const;
  std::string save(std::int64_t step, Zero2& zero, torch::nn::Module& model) const;
  std::string save(std::int64_t step, Zero3& zero) const;

  // Every rank of the group calls it; the group's size need not be the
  // writers'. Throws checkpoint::CheckpointError on every rank when the
  // checkpoint is missing, damaged, or for another model.
  void load(std::int64_t step, Zero1& zero, torch::nn::Module& model) const;
  void load(std::int64_t step, Zero2& zero, torch::nn::Module& model) const;
  void load(std::int64_t step, Zero3& zero) const;

  // The newest step whose every part is there and passes its checks,
  // whatever the number of ranks that wrote it (reads every file: one rank
  // can call it and broadcast the step). Each newer one is reported.
  std::optional<std::int64_t> latest_complete(const checkpoint::Report& report = {}) const;

  // How many ranks wrote `step` (stage 0's manifest says).
  int writers(std::int64_t step) const;
  std::string folder(std::int64_t step) const;
  std::string model_file(std::int64_t step) const;              // the whole model, for torch.load
  std::string state_file(std::int64_t step, int writer) const;  // one writer's shard
  std::string manifest_file(std::int64_t step, int writer) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int keep_last_;
  checkpoint::Checkpointer files_;  // names the files (the writer count is each checkpoint's own)
};

}  // namespace distlab::zero
