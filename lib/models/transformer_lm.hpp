// The DDP + Pipe tutorial's Transformer language model:
//   src (S, N) int64 -> embedding * sqrt(d) -> + sinusoidal position, dropout
//   -> nlayers x TransformerEncoderLayer(d, nhead, nhid, dropout) -> Linear
//   -> logits (S, N, ntokens).
// Initialisation as the tutorial: embedding and decoder weight uniform in
// [-0.1, 0.1], decoder bias zero; the encoder layers keep their own.
//
// Shapes: S-first, as nn.TransformerEncoderLayer without batch_first (and
// LibTorch 1.13 has no batch_first). The tutorial's Pipe wants the batch
// first, so its Encoder takes (N, S) and transposes, and its Decoder permutes
// back to (N, S, ntokens): model_here(src) == seed_model(src.t()).permute(1, 0, 2).
// No attention mask: the tutorial passes none (every position sees the whole
// bptt window, later tokens included). Set causal = true for the mask of the
// single-GPU tutorial it extends (generate_square_subsequent_mask).
//
// Parameter names are flat and the same whatever the split (the tutorial's
// nn.Sequential names, "0.0.encoder.weight", "1.4.decoder.bias", change with
// the split; these do not):
//   encoder.weight            embedding (ntokens, d)     first stage
//   pos_encoder.pe            buffer (max_len, 1, d)     first stage
//   layers.<i>.self_attn.in_proj_weight ... layers.<i>.norm2.bias
//   (with experts, layers.<i>.moe.* in place of linear1 and linear2)
//   decoder.weight, decoder.bias  (ntokens, d), (ntokens)  last stage
// They equal those of the PyTorch model in tests/models/reference_models.py,
// which is the tutorial's code with these names.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memory/recompute.hpp"
#include "models/moe_options.hpp"
#include "models/parameter_count.hpp"
#include "models/positional_encoding.hpp"
#include "models/split.hpp"

namespace distlab::experts {
class MoeLayerImpl;
}

namespace distlab::models {

struct TransformerLmOptions {
  int64_t ntokens = 0;   // vocabulary size
  int64_t emsize = 4096; // d
  int64_t nhid = 4096;   // feed-forward width
  int64_t nlayers = 8;
  int64_t nhead = 16;
  double dropout = 0.2;
  int64_t max_len = 5000;  // rows of the positional table (the tutorial's default)
  bool causal = false;     // the tutorial passes no mask
  MoeFeedForwardOptions moe;  // experts > 0: each layer's feed-forward a mixture of experts (moe_feed_forward.hpp)
  // What each layer recomputes in its backward instead of keeping
  // (models/encoder_layer.hpp): kFull everything but its input, kSelective
  // its attention core, kMatmuls everything but its products' outputs;
  // dense layers run by forward() and units().
  memory::Recompute recompute = memory::Recompute::kNone;
};

// "tiny" (CI, trains in seconds on CPU: d 32, ffn 64, 2 layers, 2 heads),
// "cpu" (trains visibly in minutes on 2 cores: d 128, ffn 256, 4 layers,
// 4 heads), "tutorial" (d 4096, ffn 4096, 16 heads, 8 layers, ~1 B params
// with WikiText-2's 28,783 tokens). All with the tutorial's dropout 0.2.
TransformerLmOptions transformer_lm_preset(const std::string& name, int64_t ntokens);
std::vector<std::string> transformer_lm_preset_names();

class TransformerLmImpl : public torch::nn::Module {
 public:
  // Whole model for [0, nlayers) (end_layer -1 = nlayers); a pipeline stage
  // otherwise: encoder and pos_encoder only if first_layer == 0, decoder only
  // if end_layer == nlayers.
  explicit TransformerLmImpl(const TransformerLmOptions& options, int64_t first_layer = 0, int64_t end_layer = -1);

  // src (S, N) int64 on the first stage -> (S, N, ntokens) on the last;
  // hidden (S, N, emsize) between.
  at::Tensor forward(const at::Tensor& input);

  const TransformerLmOptions& options() const { return options_; }
  int64_t first_layer() const { return first_layer_; }
  int64_t end_layer() const { return end_layer_; }
  bool has_embedding() const { return first_layer_ == 0; }
  bool has_output() const { return end_layer_ == options_.nlayers; }

  // The stage as a chain of one-tensor units that share this model's
  // modules, run in order equal to forward(): "embedding" (encoder and
  // pos_encoder, first stage), "layer<i>" (one encoder layer, making its own
  // mask), "decoder" (last stage). ZeRO-3 (lib/zero/zero3.hpp) gathers and
  // frees parameters unit by unit. The units hold this model: it lives as
  // long as they do.
  torch::nn::Sequential units();

  // Hands the layers over and forgets them (their parameters are no longer
  // this module's): a tensor-parallel stage keeps only its cut of them
  // (train/cut_layers.hpp), and gives them back by use_layers(). A layer
  // with experts carries them as its "moe" module; moes() still lists them.
  std::vector<torch::nn::TransformerEncoderLayer> release_layers();

  // The layers run some other way: `modules` in the stage's order,
  // registered under the released layers' names (after the decoder), each
  // run by forward(k, h, mask); units() and forward() then run these.
  using LayerForward = std::function<at::Tensor(size_t k, const at::Tensor& h, const at::Tensor& mask)>;
  void use_layers(std::vector<std::shared_ptr<torch::nn::Module>> modules, LayerForward forward);
  // Context parallelism (train/context_split.hpp): this rank holds some of
  // each sequence's tokens, and positions(local) gives their places in the
  // whole sequence. The embedding adds each token's own position, and the
  // layers get no mask (their attention applies the causal rule by position).
  void set_positions(std::function<at::Tensor(int64_t local)> positions);
  // The embedding's dropout drawn by `dropout` in training (alike on every
  // rank of a tensor group) instead of by the positional encoding's own.
  void set_embedding_dropout(std::function<at::Tensor(const at::Tensor&)> dropout);

  // With experts: each layer's mixture of experts (registered in the layer
  // as "moe"), in the stage's order; empty for the dense model.
  const std::vector<std::shared_ptr<experts::MoeLayerImpl>>& moes() const { return moes_; }
  // d(training loss)/d(each layer's auxiliary loss): 1 by default; 1/M
  // when a step's loss is the mean over M microbatches.
  void set_aux_loss_scale(double scale);

 private:
  // The pieces forward() is made of: (S, N) int64 -> (S, N, d) on the first
  // stage; a later stage's input checked; the (S, S) causal mask, or
  // undefined; (S, N, d) -> (S, N, ntokens) on the last stage.
  at::Tensor embed(const at::Tensor& tokens);
  at::Tensor check_hidden(const at::Tensor& h) const;
  at::Tensor mask_for(const at::Tensor& h) const;
  at::Tensor decode(const at::Tensor& h);
  size_t layer_count() const;
  at::Tensor run_layer(size_t k, const at::Tensor& h);  // the stage's k-th layer, with the causal mask if any

  TransformerLmOptions options_;
  int64_t first_layer_ = 0;
  int64_t end_layer_ = 0;
  torch::nn::Embedding encoder_{nullptr};
  PositionalEncoding pos_encoder_{nullptr};
  std::vector<torch::nn::TransformerEncoderLayer> layers_;
  std::vector<std::shared_ptr<experts::MoeLayerImpl>> moes_;  // one per layer with experts, else empty
  torch::nn::Linear decoder_{nullptr};
  std::vector<std::shared_ptr<torch::nn::Module>> used_;  // use_layers()'s modules
  LayerForward run_used_;
  std::function<at::Tensor(int64_t)> positions_;
  std::function<at::Tensor(const at::Tensor&)> embedding_dropout_;
};
TORCH_MODULE(TransformerLm);

}  // namespace distlab::models
