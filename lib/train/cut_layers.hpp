// The tensor dimension of the capstone's layout (pipeline x data x context
// x tensor): a stage's encoder layers cut across its tensor group.
//
// CutLayers takes the stage's layers (TransformerLm::release_layers, the
// same weights on every rank of the group) and gives it back a
// ParallelEncoderLayer for each (lib/tensor_parallel/layer.hpp: heads and
// feed-forward split), registered under the same names, so that the stage
// (TransformerLm::use_layers) runs them in its forward() and its units().
// The embedding, the positional table and the decoder stay whole on every
// rank of the group (they are small next to the layers at the capstone's
// sizes; the vocabulary-parallel pair of tensor_parallel/vocab.hpp is the
// way to split them). The activations between the layers are whole on
// every tensor rank, so the pipeline sends them from each tensor rank to
// the same tensor rank of the next stage.
//
// The embedding's dropout draws the same masks on every rank of the group
// (tensor_parallel::dropout_alike), as the layers' dropouts between their
// regions do: what enters the layers is the same on every tensor rank.
// A layer with experts keeps them whole on each tensor rank, run on its
// own (the whole) tokens.
//
// With the stage's recompute policy (memory/recompute.hpp) full, each cut
// layer is one recomputed region: its backward runs the layer again, its
// tensor collectives (and context exchanges) with it, and the masks it
// draws alike on the group from the same generator state (the layer's
// own_generators()); selective recomputes each layer's attention core
// (ParallelAttention::set_recompute_core). matmuls keeps the products of
// the whole, unsplit layer: the plan refuses it here.
//
// whole_state() gives the cut layers' parameters by the unsplit stage's
// names (gathered over the group), and load_whole_state() cuts them again:
// a checkpoint is the unsplit model's, whatever the tensor size that wrote it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "models/transformer_lm.hpp"
#include "tensor_parallel/layer.hpp"

namespace distlab::train {

class CutLayers {
 public:
  CutLayers() = default;  // none: the stage keeps LibTorch's whole layers
  // Cuts `stage`'s layers over `tensor` (of one rank too: a context split
  // runs in these layers' attention).
  CutLayers(models::TransformerLm& stage, comm::Communicator& tensor);

  std::vector<tensor_parallel::ParallelEncoderLayer>& layers() { return layers_; }
  // Whether a name of the stage's module ("layers.3.norm1.weight") lies in a cut layer.
  bool holds(const std::string& name) const;
  // The cut layers' parameters (or their gradients) by the unsplit stage's
  // names; every rank of the group calls it.
  std::map<std::string, at::Tensor> whole_state(bool gradients = false);
  // This rank's parts cut from the unsplit stage's state (entries outside
  // the cut layers are left alone). Throws std::invalid_argument naming a
  // missing name.
  void load_whole_state(const std::map<std::string, at::Tensor>& whole);
  // What the whole model's norm must sum over the group: the cut matrices.
  std::vector<at::Tensor> split_parameters() const;

 private:
  std::vector<std::string> prefixes_;  // "layers.<i>." of each cut layer
  std::vector<tensor_parallel::ParallelEncoderLayer> layers_;
};

}  // namespace distlab::train
