#include "models/parameter_count.hpp"

#include <torch/nn/module.h>

#include "comm/plural.hpp"
#include "models/gpt.hpp"
#include "models/transformer_lm.hpp"

namespace distlab::models {

namespace {

// nn.MultiheadAttention(d, heads): in_proj (3d, d) + bias (3d), out_proj (d, d) + bias (d).
int64_t attention_count(int64_t d) { return 4 * d * d + 4 * d; }

// linear1 (ffn, d) + bias (ffn), linear2 (d, ffn) + bias (d); with E
// experts, E of them and the router (E, d).
int64_t feed_forward_count(int64_t d, int64_t ffn, const MoeFeedForwardOptions& moe) {
  const int64_t dense = 2 * d * ffn + ffn + d;
  return moe.enabled() ? moe.experts * (dense + d) : dense;
}

int64_t layer_norm_count(int64_t d) { return 2 * d; }

}  // namespace

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& parameter : module.parameters()) total += parameter.numel();
  return total;
}

int64_t count_parameters(const GptOptions& options, int64_t first_layer, int64_t end_layer) {
  const auto [first, end] = resolve_layer_range("Gpt", options.n_layers, first_layer, end_layer);
  const int64_t d = options.dim;
  // TransformerDecoderLayer: self-attention, cross-attention, feed-forward, norm1..3.
  const int64_t layer = 2 * attention_count(d) + feed_forward_count(d, options.ffn_dim, options.moe) + 3 * layer_norm_count(d);
  int64_t total = (end - first) * layer;
  if (first == 0) total += options.vocab_size * d;                                        // tok_embeddings
  if (end == options.n_layers) total += layer_norm_count(d) + d * options.vocab_size + options.vocab_size;  // norm, output
  return total;
}

int64_t count_parameters(const TransformerLmOptions& options, int64_t first_layer, int64_t end_layer) {
  const auto [first, end] = resolve_layer_range("TransformerLm", options.nlayers, first_layer, end_layer);
  const int64_t d = options.emsize;
  // TransformerEncoderLayer: self-attention, feed-forward, norm1, norm2.
  const int64_t layer = attention_count(d) + feed_forward_count(d, options.nhid, options.moe) + 2 * layer_norm_count(d);
  int64_t total = (end - first) * layer;
  if (first == 0) total += options.ntokens * d;                                    // encoder (pe is a buffer)
  if (end == options.nlayers) total += d * options.ntokens + options.ntokens;      // decoder
  return total;
}

std::string format_parameter_count(int64_t count) {
  return "Total parameters in model: " + comm::grouped(count);
}

}  // namespace distlab::models
