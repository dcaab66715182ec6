// This rank's stage of the capstone's Transformer LM.
//
// The stage starts with the weights the whole model would have with the
// same seed (built whole, then copied by name: models/copy_state.hpp), so
// that every layout, 2 x 2 or one process, trains the same model and can be
// compared step for step. Thread ranks share one random generator, so the
// building is serialized. Above kWholeModelInitLimit parameters (the
// tutorial preset, ~1 B: 4 GB per rank for a moment) each stage is built
// directly from seed + stage instead: deterministic, but not equal to a
// one-process run's initial model.
//
// RankStage is that stage as the trainer handles it: whole, or with a
// tensor group of more than one rank cut across it, or its sequences split
// over a context group (tensor_stage.hpp).
// Either way its state is the unsplit stage's, by the unsplit names, so
// checkpoints, the best model and the digest do not depend on the tensor
// size: a checkpoint written by 2 x 2 x 2 ranks resumes on 2 x 2 x 1.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "models/transformer_lm.hpp"
#include "pipeline/stage.hpp"
#include "train/tensor_stage.hpp"

namespace distlab::train {

inline constexpr int64_t kWholeModelInitLimit = 200'000'000;

// Stage `stage` of `stages` (an even split of the layers), on the CPU.
// Throws std::invalid_argument when there are fewer layers than stages.
models::TransformerLm build_stage(const models::TransformerLmOptions& options, int stage, int stages, uint64_t seed);

class RankStage {
 public:
  // `unsplit`: build_stage's stage, the same on every rank of `tensor`
  // (this stage's tensor group); with one rank there and no context split
  // it stays whole (LibTorch's own layers).
  RankStage(models::TransformerLm unsplit, comm::Communicator& tensor, ContextSplit context = {});

  bool split() const { return !split_.is_empty(); }
  at::Tensor forward(const at::Tensor& x);
  std::shared_ptr<torch::nn::Module> module() const;
  pipeline::StageModule stage() const;
  // The stage as a chain of one-tensor units, as ZeRO shards it
  // (TransformerLm::units(); split: with the cut layers).
  torch::nn::Sequential units();
  // What this rank holds and optimizes (its cut of the split matrices).
  std::vector<at::Tensor> parameters() const;
  // A stage with experts: d(step loss)/d(each layer's auxiliary loss) per
  // forward (TransformerLm::set_aux_loss_scale). A no-op without experts.
  void set_aux_loss_scale(double scale);
  // Expert parallelism: every layer's experts spread over `experts` (this
  // stage's expert group, borrowed from its replicas), this rank keeping
  // E/G of each (MoeLayerImpl::spread_over). The state stays the unsplit
  // stage's: whole_state() gathers the experts over the group (every rank
  // of it calls it), load_whole_state() keeps this rank's slice.
  void spread_experts(comm::Communicator& experts);
  // This rank's experts' parameters and their names (empty without
  // experts): what DDP leaves to experts::average_expert_gradients.
  std::vector<at::Tensor> expert_parameters() const;
  std::set<std::string> expert_parameter_names() const;
  comm::Communicator* expert_group() const { return experts_; }
  // Each layer's tokens per expert of the step just run, as a trace counter
  // "experts layer <i>" on `rank` (experts/trace_counts.hpp); the counts
  // start afresh either way. Nothing without experts.
  void record_expert_counts(trace::Recorder* recorder, int rank);

  // Every rank of the tensor group calls these together (split: the layers'
  // pieces are gathered or cut). Whole: tensors sharing the module's storage.
  std::map<std::string, at::Tensor> whole_parameters();
  std::map<std::string, at::Tensor> whole_state();  // parameters, then buffers
  // Throws CheckpointError naming the missing and unexpected names.
  void load_whole_state(const std::map<std::string, at::Tensor>& state);
  std::set<std::string> state_names() const;

  // What the whole model's gradient norm counts once (every tensor rank
  // holds it; all of a whole stage but spread experts) and what it sums
  // over the tensor group (this rank's parts of the cut matrices): DDP's
  // norm shares (data_parallel.hpp), the second summed over the tensor
  // group (spread experts: expert_parameters(), summed over the expert group).
  std::vector<at::Tensor> replicated_parameters() const;
  std::vector<at::Tensor> split_parameters() const;

 private:
  models::TransformerLm model() const;  // the whole stage, or the split one's unsplit (its experts)

  comm::Communicator& tensor_;
  models::TransformerLm whole_{nullptr};    // when not split
  TensorParallelStage split_{nullptr};      // when split
  std::map<std::string, at::Tensor> shapes_;  // the unsplit stage's parameters and buffers, as meta tensors
  comm::Communicator* experts_ = nullptr;     // the expert group, when spread
};

}  // namespace distlab::train
