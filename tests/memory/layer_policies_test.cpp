// The encoder layer's recomputation policies (models/encoder_layer.hpp)
// against LibTorch's own TransformerEncoderLayer:
//   - every policy (none, full, selective, matmuls) gives its output, the
//     input's gradient and every parameter's gradient bit for bit, dropout
//     on, causal mask, in float32 and with bf16 products;
//   - what each keeps between its forward and its backward, measured by
//     the allocator meter, equals its derivation to the byte (and LibTorch's
//     own layer keeps what the plain policy keeps);
//   - the recomputation runs the region again: a kept product is taken back,
//     not computed (the matmuls policy holds its products until the backward).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "memory/allocator_meter.hpp"
#include "memory/precision.hpp"
#include "memory/products.hpp"
#include "models/encoder_layer.hpp"
#include "models/layer_stack.hpp"

namespace {

using distlab::memory::Recompute;
using distlab::models::activation_bytes;
using distlab::models::run_encoder_layer;

constexpr int64_t kSeq = 12, kBatch = 3, kWidth = 32, kHeads = 4, kFfn = 64;
const Recompute kPolicies[] = {Recompute::kNone, Recompute::kFull, Recompute::kSelective, Recompute::kMatmuls};

torch::nn::TransformerEncoderLayer make_layer(double dropout) {
  torch::manual_seed(7);
  return torch::nn::TransformerEncoderLayer(
      torch::nn::TransformerEncoderLayerOptions(kWidth, kHeads).dim_feedforward(kFfn).dropout(dropout));
}

at::Tensor causal() { return at::triu(at::full({kSeq, kSeq}, -std::numeric_limits<float>::infinity()), 1); }

struct Outcome {
  at::Tensor out, input_grad;
  std::vector<at::Tensor> grads;
};

// policy < 0: LibTorch's own forward.
Outcome run(int policy, distlab::memory::Precision precision = distlab::memory::Precision::kFp32) {
  torch::nn::TransformerEncoderLayer layer = make_layer(0.3);
  torch::manual_seed(8);
  const at::Tensor src = torch::randn({kSeq, kBatch, kWidth}).requires_grad_(true);
  torch::manual_seed(9);  // the dropout masks
  at::Tensor out;
  {
    distlab::memory::ComputeIn guard(precision, c10::DeviceType::CPU);
    out = policy < 0 ? layer(src, causal()) : run_encoder_layer(*layer, src, causal(), kPolicies[policy]);
  }
  (out * out.detach().sin()).sum().backward();
  Outcome o{out.detach(), src.grad().clone(), {}};
  for (const auto& p : layer->parameters()) o.grads.push_back(p.grad().clone());
  return o;
}

TEST(LayerPolicies, EveryPolicyGivesLibTorchsLayerBitForBit) {
  for (const auto precision : {distlab::memory::Precision::kFp32, distlab::memory::Precision::kBf16}) {
    const Outcome torch_layer = run(-1, precision);
    for (int policy = 0; policy < 4; ++policy) {
      const Outcome mine = run(policy, precision);
      const std::string name =
          std::string(distlab::memory::to_string(kPolicies[policy])) + " in " + distlab::memory::to_string(precision);
      EXPECT_TRUE(torch::equal(mine.out, torch_layer.out)) << name << ": output";
      EXPECT_TRUE(torch::equal(mine.input_grad, torch_layer.input_grad)) << name << ": input gradient";
      ASSERT_EQ(mine.grads.size(), torch_layer.grads.size());
      for (size_t i = 0; i < mine.grads.size(); ++i)
        EXPECT_TRUE(torch::equal(mine.grads[i], torch_layer.grads[i])) << name << ": parameter " << i;
    }
  }
}

// The bytes still allocated after the forward, its output held, against
// each policy's derivation, in float32 and with bf16 products.
TEST(LayerPolicies, EachKeepsWhatItsDerivationSays) {
  using distlab::memory::Precision;
  auto& meter = distlab::memory::AllocatorMeter::install();
  const int64_t generator = distlab::memory::generator_state_bytes();
  const distlab::tensor_parallel::LayerShape shape{kSeq, kBatch, kWidth, kHeads, kFfn};
  for (const bool dropout : {true, false}) {
    torch::nn::TransformerEncoderLayer layer = make_layer(dropout ? 0.3 : 0.0);
    const at::Tensor src = torch::randn({kSeq, kBatch, kWidth}).requires_grad_(true);
    const at::Tensor mask = causal();
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      const std::string in = std::string(" in ") + distlab::memory::to_string(precision);
      {
        const int64_t before = meter.allocated();
        distlab::memory::ComputeIn guard(precision, c10::DeviceType::CPU);
        const at::Tensor out = layer(src, mask);
        EXPECT_EQ(meter.allocated() - before, activation_bytes(shape, Recompute::kNone, dropout, generator, precision))
            << "LibTorch's layer, dropout " << dropout << in;
      }
      for (const Recompute policy : kPolicies) {
        const int64_t before = meter.allocated();
        at::Tensor out;
        {
          distlab::memory::ComputeIn guard(precision, c10::DeviceType::CPU);
          out = run_encoder_layer(*layer, src, mask, policy);
        }
        EXPECT_EQ(meter.allocated() - before, activation_bytes(shape, policy, dropout, generator, precision))
            << distlab::memory::to_string(policy) << ", dropout " << dropout << in;
      }
    }
  }
  // Selective keeps less than none by the s x s tensors, which grow with the square of the sequence.
  EXPECT_EQ(
      activation_bytes(shape, Recompute::kNone, true, 0) - activation_bytes(shape, Recompute::kSelective, true, 0),
      4 * 3 * kHeads * kSeq * kSeq * kBatch);
  // bf16 keeps the weights' copies: what it saves on activations a small batch pays back in weights.
  const int64_t copies = 2 * (4 * kWidth * kWidth + 2 * kWidth * kFfn);
  EXPECT_EQ(activation_bytes(shape, Recompute::kFull, true, 0, Precision::kBf16),
            activation_bytes(shape, Recompute::kFull, true, 0));
  EXPECT_GT(activation_bytes(shape, Recompute::kNone, false, 0, Precision::kBf16),
            copies + activation_bytes(shape, Recompute::kNone, false, 0) / 2);
}

// A stack of layers keeps its derivation (LayerStack::kept_formula) under
// every policy and precision, whether its input needs a gradient or not.
TEST(LayerPolicies, AStackKeepsItsDerivation) {
  using distlab::memory::Precision;
  distlab::models::LayerStackOptions o;
  o.layers = 3, o.hidden = kWidth, o.heads = kHeads, o.ffn = kFfn, o.dropout = 0.3;
  distlab::models::LayerStack stack(o);
  for (const bool grad : {false, true}) {
    at::Tensor x = distlab::models::layer_stack_input(kSeq, kBatch, kWidth);
    if (grad) x.requires_grad_(true);
    for (const Precision precision : {Precision::kFp32, Precision::kBf16})
      for (const Recompute policy : kPolicies)
        EXPECT_EQ(stack.kept_bytes(x, policy, precision), stack.kept_formula(x, policy, precision))
            << distlab::memory::to_string(policy) << " in " << distlab::memory::to_string(precision)
            << (grad ? ", input needs a gradient" : "");
  }
}

TEST(LayerPolicies, KeptProductsAreTakenBackNotComputedAgain) {
  distlab::memory::KeptProducts kept;
  const at::Tensor x = torch::randn({5, 8}).requires_grad_(true), w = torch::randn({4, 8}).requires_grad_(true),
                   b = torch::randn({4}).requires_grad_(true);
  at::Tensor first;
  {
    at::NoGradGuard off;
    first = kept.linear(x, w, b);
  }
  EXPECT_EQ(kept.kept(), 1u);
  const at::Tensor again = kept.linear(x, w, b);  // gradients on: the kept output
  EXPECT_EQ(again.data_ptr(), first.data_ptr()) << "the product was computed again";
  EXPECT_EQ(kept.kept(), 0u);
  again.sum().backward();
  const at::Tensor gx = x.grad().clone(), gw = w.grad().clone(), gb = b.grad().clone();
  x.mutable_grad().reset(), w.mutable_grad().reset(), b.mutable_grad().reset();
  at::linear(x, w, b).sum().backward();
  EXPECT_TRUE(torch::equal(gx, x.grad()));
  EXPECT_TRUE(torch::equal(gw, w.grad()));
  EXPECT_TRUE(torch::equal(gb, b.grad()));
  EXPECT_THROW(kept.bmm(torch::randn({1, 2, 2}), torch::randn({1, 2, 2})), std::logic_error)
      << "a product the first run did not compute was made up";
}

}  // namespace
