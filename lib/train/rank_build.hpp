// What the plan builds for one rank (plan.hpp says what, this makes it):
// its groups, its roles, and the stages it holds, each built with the whole
// model's initial weights on the world's device and wrapped in the plan's
// data-parallel strategy (data_parallel.hpp).
//
//   groups   layout.hpp's, one split per axis, and for each held stage with
//            experts spread over N ranks its expert group and the group of
//            its experts' copies, both subdivisions of the stage's
//            averaging group (data x context), as Megatron's are;
//   stages   the plan's stages_held, each a RankStage (whole, cut across
//            the tensor group, its sequences split over the context group,
//            its experts spread);
//   strategy each stage's DDP or ZeRO-k over its averaging group (its own
//            copy of that group when a rank holds several stages, split in
//            stage order on every replica).
//
// The trainer's loop asks it for everything a step, an evaluation and a
// checkpoint need, and branches on no dimension (trainer.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "models/transformer_lm.hpp"
#include "train/data_parallel.hpp"
#include "train/layout.hpp"
#include "train/plan.hpp"
#include "train/stage_model.hpp"

namespace distlab::train {

struct RankBuild {
  Groups groups;
  Roles roles;
  ContextSplit context;               // the stage's context group (C = 1: none)
  std::vector<int> stage_numbers;     // this rank's stages (one, or v), in stage order
  std::vector<int> rank_of_stage;     // every stage's pipeline rank, as the schedule places them
  bool first = false, last = false;   // holds the model's first / last stage
  // Experts spread over the replicas: each forward needs every rank of an
  // expert group (its all-to-alls), so a replica with no batch left runs one anyway.
  bool forwards_together = false;
  std::vector<std::unique_ptr<RankStage>> stages;
  std::vector<std::unique_ptr<comm::Communicator>> stage_replicas;  // several stages per rank: one group each
  std::vector<std::unique_ptr<comm::Communicator>> expert_groups, expert_copies;
  std::vector<std::unique_ptr<DataParallelStage>> data_parallel;  // one per held stage

  int last_rank() const { return rank_of_stage.back(); }  // the pipeline rank computing the loss

  // The unsplit stages' tensors by their names, all of this rank's stages
  // (cut across a tensor group or spread over an expert group: gathered;
  // sharded by ZeRO-3: gathered from the replica group). Every rank of the
  // replica group (and of those groups) calls it at the same point.
  // (ZeRO-3 gathered them: copies, which outlive the gathering.)
  std::map<std::string, at::Tensor> whole_state(bool parameters_only = false);
  // For a checkpoint: every rank calls it; the ranks that write one
  // (roles.speaks_for_stage) get the whole state, the others nothing.
  std::optional<std::map<std::string, at::Tensor>> checkpoint_state();
  std::set<std::string> state_names() const;
  // Each stage takes its names from `state`, which must hold no others;
  // throws checkpoint::CheckpointError otherwise. Every rank of the replica
  // group calls it (ZeRO-3: each keeps its chunk of what was loaded).
  void load_state(const std::map<std::string, at::Tensor>& state);

  // An evaluation's scope: the stages in eval mode and, while it lasts,
  // their parameters whole (ZeRO-3 gathers them once for the evaluation,
  // not per forward: the replicas evaluate different batches). Every rank
  // of the replica group enters it at the same point.
  class Evaluating {
   public:
    explicit Evaluating(RankBuild& rank);
    ~Evaluating();
    Evaluating(const Evaluating&) = delete;
    Evaluating& operator=(const Evaluating&) = delete;

   private:
    RankBuild& rank_;
    std::vector<std::unique_ptr<WholeScope>> whole_;
  };
  Evaluating evaluating() { return Evaluating(*this); }

  // torch's clip_grad_norm_ over the whole model (collectives/grad_norm.hpp):
  // every held stage's shares, then every stage over the pipeline group.
  // Returns the norm before clipping.
  double clip_grad_norm(double max_norm);
  // The gradients this rank's stages hold after end_step (DDP: whole; ZeRO:
  // this rank's shard), the ones clipping sees.
  std::vector<at::Tensor> held_gradients();
  // Arms stage `stage`'s strategy before its last backward of the step.
  void before_last_backward(int stage);
  void set_lr(double lr);
  void set_aux_loss_scale(double scale);  // experts' auxiliary losses (RankStage)

 private:
  std::map<std::string, at::Tensor> stages_state(bool parameters_only);  // no gathers of ZeRO-3's
  // Each stage's parameters whole until the scopes end (the strategy's
  // whole(): ZeRO-3 gathers them from the replica group, the others hold
  // them whole already).
  std::vector<std::unique_ptr<WholeScope>> whole();
};

// Every rank of `world` calls it alike (the groups' splits, DDP's
// broadcasts). `model`: the whole model, built from `seed`; SGD at `lr`.
RankBuild build_rank(const ParallelPlan& plan, comm::Communicator& world, const models::TransformerLmOptions& model,
                     uint64_t seed, double lr);

}  // namespace distlab::train
