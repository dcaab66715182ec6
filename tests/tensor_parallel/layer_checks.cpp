// The tensor-parallel layers against the unsplit torch layers they were cut
// from, dropout 0: the encoder layer (the capstone's: post-norm, relu, a
// causal mask) and the decoder layer (the pipelining tutorial's GPT: called as layer(h, h),
// no mask). E=24, 12 heads, feed-forward 48, (S=12, N=2) inputs, so that
// t = 1, 2, 3 and 4 all split them. Output, input gradient and every
// parameter's gradient (gathered whole by whole_state(true)) equal the
// unsplit layer's to float32 rounding, with and without sequence
// parallelism; whole_state() gives back the unsplit weights bit for bit.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/transformerlayer.h>

#include <limits>
#include <map>

#include "checks.hpp"
#include "tensor_parallel/layer.hpp"

namespace distlab::tensor_parallel::testing {
namespace {

constexpr int64_t kSeq = 12, kBatch = 2, kDim = 24, kHeads = 12, kFfn = 48;

// The unsplit layers, their weights drawn from a generator of their own
// (thread ranks build them at once; the global generator would give each
// another).
template <typename Layer>
Layer with_weights(Layer layer, uint64_t seed = 5) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  at::NoGradGuard no_grad;
  for (auto& item : layer->named_parameters()) {
    at::Tensor p = item.value();
    const bool norm = item.key().rfind("norm", 0) == 0;
    p.copy_(norm && item.key().find("weight") != std::string::npos ? 1.0 + 0.1 * at::randn(p.sizes(), g)
                                                                     : 0.2 * at::randn(p.sizes(), g));
  }
  return layer;
}

torch::nn::TransformerEncoderLayer unsplit_encoder(uint64_t seed = 5) {
  return with_weights(torch::nn::TransformerEncoderLayer(
                          torch::nn::TransformerEncoderLayerOptions(kDim, kHeads).dim_feedforward(kFfn).dropout(0.0)),
                      seed);
}

torch::nn::TransformerDecoderLayer unsplit_decoder(uint64_t seed = 5) {
  return with_weights(torch::nn::TransformerDecoderLayer(
                          torch::nn::TransformerDecoderLayerOptions(kDim, kHeads).dim_feedforward(kFfn).dropout(0.0)),
                      seed);
}

at::Tensor causal(int64_t s) {
  return at::triu(at::full({s, s}, -std::numeric_limits<float>::infinity()), 1);
}

// `forward(layer, x)` runs a layer (unsplit or parallel) on x.
template <typename Full, typename Parallel, typename Forward>
double check_layer(comm::Communicator& group, bool sequence_parallel, Full full, Forward forward) {
  at::Generator g = at::detail::createCPUGenerator(13);
  const at::Tensor x_whole = at::randn({kSeq, kBatch, kDim}, g), probe = at::randn({kSeq, kBatch, kDim}, g);
  at::Tensor x_ref = x_whole.clone().requires_grad_(true);
  const at::Tensor y_ref = forward(full, x_ref);
  (y_ref * probe).sum().backward();

  const ParallelOptions options{sequence_parallel};
  Parallel layer(group, full, options);
  auto mine = [&](const at::Tensor& whole) { return sequence_parallel ? my_sequence_rows(group, whole) : whole; };
  at::Tensor x = mine(x_whole).clone().requires_grad_(true);
  const at::Tensor y = forward(layer, x);
  (y * mine(probe)).sum().backward();
  sync_sequence_parallel_grads(group, layer->replicated_parameters(), options);

  test_support::Worst worst;
  worst.add(y, mine(y_ref.detach()));
  worst.add(x.grad(), mine(x_ref.grad()));
  const std::map<std::string, at::Tensor> grads = layer->whole_state(/*gradients=*/true);
  for (const auto& item : full->named_parameters())
    worst.add(grads.count(item.key()) ? largest_difference(grads.at(item.key()), item.value().grad())
                                      : test_support::kInfinite);
  return worst.value;
}

double check_encoder(comm::Communicator& group, bool sequence_parallel) {
  const at::Tensor mask = causal(kSeq);
  return check_layer<torch::nn::TransformerEncoderLayer, ParallelEncoderLayer>(
      group, sequence_parallel, unsplit_encoder(), [&](auto& layer, const at::Tensor& x) { return layer(x, mask); });
}

double check_decoder(comm::Communicator& group, bool sequence_parallel) {
  return check_layer<torch::nn::TransformerDecoderLayer, ParallelDecoderLayer>(
      group, sequence_parallel, unsplit_decoder(), [](auto& layer, const at::Tensor& x) { return layer(x, x); });
}

// Cut and gathered back: the unsplit weights, bit for bit.
template <typename Parallel, typename Full>
double check_round_trip(comm::Communicator& group, Full full) {
  Parallel layer(group, full);
  const std::map<std::string, at::Tensor> state = layer->whole_state();
  test_support::Worst worst;
  if (state.size() != full->named_parameters().size()) worst.add(test_support::kInfinite);
  for (const auto& item : full->named_parameters())
    worst.add(state.count(item.key()) ? largest_difference(state.at(item.key()), item.value())
                                      : test_support::kInfinite);
  return worst.value;
}

// Cut from one unsplit layer, loaded with another's state (a checkpoint of
// the unsplit model): gathered back, that state bit for bit.
template <typename Parallel, typename Full>
double check_load(comm::Communicator& group, Full cut_from, Full loaded) {
  Parallel layer(group, cut_from);
  std::map<std::string, at::Tensor> state;
  for (const auto& item : loaded->named_parameters()) state[item.key()] = item.value().detach();
  layer->load_whole_state(state);
  const std::map<std::string, at::Tensor> back = layer->whole_state();
  test_support::Worst worst;
  if (back.size() != state.size()) worst.add(test_support::kInfinite);
  for (const auto& [name, value] : state)
    worst.add(back.count(name) ? largest_difference(back.at(name), value) : test_support::kInfinite);
  return worst.value;
}

}  // namespace

std::vector<Check> layer_checks() {
  auto splits = [](int t) { return kHeads % t == 0 && kFfn % t == 0 && kSeq % t == 0; };
  auto encoder_round_trip = [](comm::Communicator& g) {
    return check_round_trip<ParallelEncoderLayer>(g, unsplit_encoder());
  };
  auto decoder_round_trip = [](comm::Communicator& g) {
    return check_round_trip<ParallelDecoderLayer>(g, unsplit_decoder());
  };
  return {{"encoder", 2e-5, [](comm::Communicator& g) { return check_encoder(g, false); }, splits},
          {"encoder_sp", 2e-5, [](comm::Communicator& g) { return check_encoder(g, true); }, splits},
          {"encoder_round_trip", 1e-30, encoder_round_trip, splits},
          {"decoder", 2e-5, [](comm::Communicator& g) { return check_decoder(g, false); }, splits},
          {"decoder_sp", 2e-5, [](comm::Communicator& g) { return check_decoder(g, true); }, splits},
          {"decoder_round_trip", 1e-30, decoder_round_trip, splits},
          {"encoder_load", 1e-30,
           [](comm::Communicator& g) {
             return check_load<ParallelEncoderLayer>(g, unsplit_encoder(5), unsplit_encoder(6));
           },
           splits},
          {"decoder_load", 1e-30,
           [](comm::Communicator& g) {
             return check_load<ParallelDecoderLayer>(g, unsplit_decoder(5), unsplit_decoder(6));
           },
           splits}};
}

}  // namespace distlab::tensor_parallel::testing
