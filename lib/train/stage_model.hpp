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
// RankStage is that stage as the trainer handles it, wrapped dimension by
// dimension: its layers cut across a tensor group of more than one rank
// (cut_layers.hpp; across a group of one when its sequences split, whose
// attention runs in cut layers), then its sequences split over a context group
// (context_split.hpp), then its experts spread over an expert group; each
// step leaves the others as they were, and with none it is the stage as
// built (LibTorch's own layers).
// Whatever was applied, its state is the unsplit stage's, by the unsplit names, so
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
#include "train/context_split.hpp"
#include "train/cut_layers.hpp"

namespace distlab::train {

inline constexpr int64_t kWholeModelInitLimit = 200'000'000;

// Where one of a rank's parameters lives. It decides, in one place, what the
// parameter's gradient adds to the whole model's norm and over which group,
// which ZeRO segments add over the tensor group, and which gradients DDP
// leaves to the experts' own averaging.
enum class Placement {
  kReplicated,  // the same on every rank of the stage's tensor group
  kCut,         // a part of an unsplit matrix, cut over the tensor group
  kSpread,      // an expert this rank keeps; the expert group's other ranks keep the others
};
inline constexpr Placement kPlacements[] = {Placement::kReplicated, Placement::kCut, Placement::kSpread};
const char* placement_name(Placement placement);  // "replicated", "cut", "spread"

struct PlacedParameter {
  std::string name;  // module()'s name for it
  at::Tensor tensor;
  Placement placement;
};
// The tensors of `held` placed so, in their order.
std::vector<at::Tensor> tensors_placed(const std::vector<PlacedParameter>& held, Placement placement);

// Stage `stage` of `stages` (an even split of the layers), on the CPU.
// Throws std::invalid_argument when there are fewer layers than stages.
models::TransformerLm build_stage(const models::TransformerLmOptions& options, int stage, int stages, uint64_t seed);

class RankStage {
 public:
  // `unsplit`: build_stage's stage, the same on every rank of `tensor`
  // (this stage's tensor group); with one rank there and no context split
  // its layers stay whole.
  RankStage(models::TransformerLm unsplit, comm::Communicator& tensor, ContextSplit context = {});

  at::Tensor forward(const at::Tensor& x);
  std::shared_ptr<torch::nn::Module> module() const;
  pipeline::StageModule stage() const;
  // The stage as a chain of one-tensor units, as ZeRO shards it
  // (TransformerLm::units(): with the cut layers, if cut).
  torch::nn::Sequential units();
  // What this rank holds and optimizes (its cut of the split matrices).
  std::vector<at::Tensor> parameters() const;
  // A stage with experts: d(step loss)/d(each layer's auxiliary loss) per
  // forward (TransformerLm::set_aux_loss_scale). A no-op without experts.
  void set_aux_loss_scale(double scale);
  // Expert parallelism: every layer's experts spread over `experts` (this
  // stage's expert group, borrowed from its replicas and context ranks;
  // cut across a tensor group, each tensor rank has its own), this rank
  // keeping E/G of each (MoeLayerImpl::spread_over). The state stays the
  // unsplit stage's: whole_state() gathers the experts over the group
  // (every rank of it calls it), load_whole_state() keeps this rank's slice.
  void spread_experts(comm::Communicator& experts);
  comm::Communicator* expert_group() const { return experts_; }
  // Each layer's tokens per expert of the step just run, as a trace counter
  // "experts layer <i>" on `rank` (experts/trace_counts.hpp); the counts
  // start afresh either way. Nothing without experts.
  void record_expert_counts(trace::Recorder* recorder, int rank);

  // Every rank of the tensor group (and of the expert group) calls these
  // together: by placement, cut layers are gathered or cut over the tensor
  // group, spread experts over the expert group. Outside the cut layers and
  // not spread: tensors sharing the module's storage.
  std::map<std::string, at::Tensor> whole_parameters();
  std::map<std::string, at::Tensor> whole_gradients();  // the same for their .grad (none: zeros)
  std::map<std::string, at::Tensor> whole_state();  // parameters, then buffers
  // Throws CheckpointError naming the missing and unexpected names.
  void load_whole_state(const std::map<std::string, at::Tensor>& state);
  std::set<std::string> state_names() const;

  // Every parameter this rank holds, once each, in module()'s order, with
  // its placement: cut when it is one of the cut layers' cut pieces, spread when it is one of the experts spread over
  // the expert group, replicated otherwise.
  std::vector<PlacedParameter> placed_parameters() const;
  std::vector<at::Tensor> parameters_placed(Placement placement) const;
  std::set<std::string> names_placed(Placement placement) const;
  // The group a placement's gradients add over for the whole model's norm,
  // beyond the replicas: the tensor group for cut pieces (when it has more
  // than one rank), the expert group for spread experts; none otherwise.
  comm::Communicator* group_of(Placement placement) const;

 private:
  std::map<std::string, at::Tensor> gathered(bool gradients);

  comm::Communicator& tensor_;
  models::TransformerLm lm_;
  CutLayers cut_;                             // the tensor dimension's, if cut
  std::map<std::string, at::Tensor> shapes_;  // the unsplit stage's parameters and buffers, as meta tensors
  comm::Communicator* experts_ = nullptr;     // the expert group, when spread
};

}  // namespace distlab::train
