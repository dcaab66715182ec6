// The data-parallel dimension of the trainer, one object per stage a rank
// holds: how that stage's replicas keep their copies equal.
//
// The trainer runs one pipeline executor over all of a rank's stages and
// asks each stage's object, in this order, every step:
//
//   zero_grad()             gradients to zero (ZeRO: its buffers, its shard)
//   begin_step()            the microbatches' backwards accumulate without traffic
//   before_last_backward()  from the executor's hook, just before this stage's
//                           last backward: that backward synchronizes (DDP's
//                           buckets all-reduce, ZeRO-2/3's reduce-scatter)
//   end_step()              after the executor's step: what is left (DDP waits
//                           for its buckets if the engine did not; ZeRO-1
//                           reduce-scatters the summed .grad once)
//   norm_shares()           what the whole model's gradient norm counts of it
//                           (collectives/grad_norm.hpp adds every stage's shares)
//   optimizer_step()
//
// and, between steps, whole() (the stage's parameters whole while the guard
// lives: ZeRO-3 gathers them) and stats(). Two implementations:
//
//   DDP       the stage whole on every replica, its gradients all-reduced in
//             buckets during the last backward (lib/ddp); PyTorch's
//             pipelining arms DDP's reducer the same way ("HACK" in
//             torch/distributed/pipelining/stage.py), here through DDP's
//             public prepare_forward() and the executor's before_backward hook;
//   ZeRO-k    each replica owns 1/R of the optimizer state (k = 1), of the
//             gradients too (2), of the parameters too (3: the stage runs as
//             a chain of units, each gathered for its forward and backward),
//             lib/zero. ZeRO-1/2 send the bytes of DDP's once-per-step
//             all-reduce (a reduce-scatter and an all-gather are its two
//             halves); ZeRO-3 gathers every unit twice per microbatch.
//
// make_data_parallel() picks one from the plan's strategy.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/grad_norm.hpp"
#include "comm/communicator.hpp"
#include "ddp/reducer.hpp"
#include "pipeline/executor.hpp"
#include "train/stage_model.hpp"

namespace distlab::train {

using collectives::NormShare;  // what a stage adds to the whole model's gradient norm

struct DataParallelStats {
  std::string strategy;       // "DDP", "ZeRO-1", ...
  int64_t synced_steps = 0;   // steps whose gradients crossed the replica group: one per step
  ddp::ReducerStats ddp;      // DDP's reducer (zero under ZeRO)
};

// While it lives, a stage's parameters are whole on this rank. ZeRO-3
// gathers them from the replica group and shards them again when it ends;
// the other strategies hold them whole already (a scope that does nothing).
class WholeScope {
 public:
  virtual ~WholeScope() = default;
  // The whole tensors exist only while the scope does: whoever keeps one
  // past it keeps a copy.
  virtual bool temporary() const { return false; }
};

class DataParallelStage {
 public:
  virtual ~DataParallelStage() = default;
  // What the executor runs for this stage (ZeRO-3: unit by unit, gathering).
  virtual pipeline::StageModule stage() = 0;
  virtual void zero_grad() = 0;
  virtual void begin_step() = 0;
  virtual void before_last_backward() = 0;
  virtual void end_step() = 0;
  virtual std::vector<NormShare> norm_shares() = 0;
  virtual void optimizer_step() = 0;
  virtual void set_lr(double lr) = 0;
  virtual std::unique_ptr<WholeScope> whole() { return std::make_unique<WholeScope>(); }
  virtual DataParallelStats stats() = 0;
};

// The strategy `zero` (0: DDP, 1-3: ZeRO-k) for `stage` among its replicas
// `replicas` (group rank = replica), SGD at `lr`. Every replica of the stage
// calls it alike (DDP broadcasts replica 0's parameters; ZeRO takes them).
// `tensor`: the stage's tensor group (its cut matrices' squares are summed
// over it). ZeRO shards the stage's units (RankStage::units()): cut across
// a tensor group, each tensor rank's replicas shard that rank's pieces.
// `expert_copies`: a stage whose experts are spread over an expert group
// (RankStage::spread_experts) averages its experts over the ranks holding
// the same experts (summed, / R) instead of the replicas: DDP through
// experts::average_expert_gradients, ZeRO-k with a second ZeRO over those
// ranks (ZeRO-2 under ZeRO-3, which leaves the experts out of its units);
// their squares add to the norm over the expert group too.
std::unique_ptr<DataParallelStage> make_data_parallel(int zero, comm::Communicator& replicas,
                                                      comm::Communicator& tensor, RankStage& stage, double lr,
                                                      comm::Communicator* expert_copies = nullptr);

}  // namespace distlab::train
