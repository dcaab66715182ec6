// The pipelining tutorial's GPT-style decoder: token embedding, n_layers
// TransformerDecoderLayer(dim, heads) each called as layer(h, h), LayerNorm,
// linear output cast to float. Built whole or as one stage of a manual split.
//
// Shapes: PyTorch's TransformerDecoderLayer defaults to batch_first=False
// (and LibTorch 1.13 has no batch_first at all), so for tokens (A, B) the
// attention mixes positions along dim 0 and dim 1 is the batch:
//   tokens (A, B) int64 -> embedding (A, B, dim) -> layers (A, B, dim)
//   -> norm, output (A, B, vocab_size) float.
// The seed feeds x of shape (32, 500), so its 32 "rows" attend to each other
// and its 500 "positions" are independent samples. DistLab keeps these exact
// semantics (outputs equal PyTorch's for the same weights). Consequence for
// pipelining: microbatches must be cut along dim 1 for the split model to
// equal the unsplit one; cutting along dim 0, as the tutorial's x.chunk() does,
// changes what each row attends to and so changes the result.
//
// Parameter names are the whole model's whatever the stage (the pipelining tutorial's
// ModuleDict keeps them): tok_embeddings.weight, layers.<i>.self_attn.in_proj_weight,
// layers.<i>.multihead_attn.out_proj.bias, layers.<i>.linear1.weight,
// layers.<i>.norm3.bias, norm.weight, output.weight, output.bias (with
// experts, layers.<i>.moe.* in place of linear1 and linear2). A
// checkpoint of the stages is therefore a checkpoint of the model, and the
// names equal those of the tutorial's PyTorch model (tests/models/reference_models.py).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "models/moe_options.hpp"
#include "models/parameter_count.hpp"
#include "models/split.hpp"

namespace distlab::experts {
class MoeLayerImpl;
}

namespace distlab::models {

struct GptOptions {
  int64_t dim = 512, n_layers = 8, n_heads = 8, vocab_size = 10000;
  // The seed leaves these at TransformerDecoderLayer's defaults.
  int64_t ffn_dim = 2048;
  double dropout = 0.1;
  MoeFeedForwardOptions moe;  // experts > 0: each layer's feed-forward a mixture of experts (moe_feed_forward.hpp)
};

class GptImpl : public torch::nn::Module {
 public:
  // The whole model when [first_layer, end_layer) covers every layer
  // (end_layer -1 = n_layers); a pipeline stage otherwise: tok_embeddings only
  // if first_layer == 0, norm and output only if end_layer == n_layers.
  explicit GptImpl(const GptOptions& options, int64_t first_layer = 0, int64_t end_layer = -1);

  // First stage: tokens int64 (A, B); other stages: hidden float (A, B, dim).
  // Last stage returns logits (A, B, vocab_size) float; others hidden (A, B, dim).
  at::Tensor forward(const at::Tensor& input);

  const GptOptions& options() const { return options_; }
  int64_t first_layer() const { return first_layer_; }
  int64_t end_layer() const { return end_layer_; }
  bool has_embedding() const { return first_layer_ == 0; }
  bool has_output() const { return end_layer_ == options_.n_layers; }

  // With experts: each layer's mixture of experts ("layers.<i>.moe"); empty
  // for the dense model. The aux scale as TransformerLm's.
  const std::vector<std::shared_ptr<experts::MoeLayerImpl>>& moes() const { return moes_; }
  void set_aux_loss_scale(double scale);

 private:
  GptOptions options_;
  int64_t first_layer_ = 0;
  int64_t end_layer_ = 0;
  torch::nn::Embedding tok_embeddings_{nullptr};
  std::vector<torch::nn::TransformerDecoderLayer> layers_;
  std::vector<std::shared_ptr<experts::MoeLayerImpl>> moes_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear output_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace distlab::models
