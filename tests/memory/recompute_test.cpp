// Activation recomputation (memory/recompute.hpp) against its naive
// version, the plain forward that keeps everything: the same loss and the
// same gradients bit for bit in float32, dropout on (the masks drawn again
// from the same generator state); the region run twice, not once; and
// what the forward keeps for the backward, measured by the allocator
// meter, against what each way must keep, counted by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "memory/allocator_meter.hpp"
#include "memory/recompute.hpp"

namespace {

using distlab::memory::checkpoint;
using distlab::memory::Tensors;

constexpr int64_t kRows = 64, kWidth = 512, kLayers = 4;

// kLayers x (Linear(kWidth) -> GELU -> Dropout(0.3)).
struct Stack {
  std::vector<torch::nn::Linear> layers;
  torch::nn::Dropout dropout{torch::nn::DropoutOptions(0.3)};
  int runs = 0;  // how many times a layer's forward ran

  Stack() {
    torch::manual_seed(3);
    for (int i = 0; i < kLayers; ++i) layers.emplace_back(kWidth, kWidth);
  }
  at::Tensor layer(int i, const at::Tensor& x) {
    ++runs;
    return dropout(torch::gelu(layers[i](x)));
  }
  at::Tensor forward(const at::Tensor& x, bool recompute) {
    at::Tensor h = x;
    for (int i = 0; i < kLayers; ++i)
      h = recompute ? checkpoint([this, i](const at::Tensor& in) { return layer(i, in); }, h) : layer(i, h);
    return h;
  }
  std::vector<at::Tensor> grads() const {
    std::vector<at::Tensor> g;
    for (const auto& l : layers)
      for (const auto& p : l->parameters()) g.push_back(p.grad().clone());
    return g;
  }
};

struct Outcome {
  at::Tensor loss, input_grad;
  std::vector<at::Tensor> grads;
  int runs = 0;
};

Outcome run(bool recompute, uint64_t seed = 11) {
  Stack stack;
  torch::manual_seed(100);
  at::Tensor x = torch::randn({kRows, kWidth}).requires_grad_(true);
  torch::manual_seed(seed);
  at::Tensor y = stack.forward(x, recompute);
  at::Tensor loss = y.pow(2).mean();
  loss.backward();
  return {loss.detach(), x.grad().clone(), stack.grads(), stack.runs};
}

TEST(Recompute, EqualsThePlainBackwardBitForBitWithDropoutOn) {
  const Outcome plain = run(false), again = run(true);
  ASSERT_TRUE(torch::isfinite(plain.loss).item<bool>());
  EXPECT_TRUE(torch::equal(plain.loss, again.loss));
  EXPECT_TRUE(torch::equal(plain.input_grad, again.input_grad));
  ASSERT_EQ(plain.grads.size(), again.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_TRUE(torch::isfinite(plain.grads[i]).all().item<bool>()) << i;
    EXPECT_TRUE(torch::equal(plain.grads[i], again.grads[i])) << "parameter " << i;
  }
  // Each layer ran once in the plain run, twice (forward, then again in the
  // backward) recomputed.
  EXPECT_EQ(plain.runs, kLayers);
  EXPECT_EQ(again.runs, 2 * kLayers);
  // The masks matter: another seed draws others, and other gradients, so
  // equal gradients above are the same masks drawn again.
  const Outcome other = run(false, 12);
  EXPECT_FALSE(torch::equal(plain.grads[0], other.grads[0]));
}

TEST(Recompute, UnderNoGradItIsThePlainForward) {
  Stack stack;
  at::Tensor x = torch::randn({kRows, kWidth});
  torch::NoGradGuard off;
  stack.dropout->eval();
  EXPECT_TRUE(torch::equal(stack.forward(x, true), stack.forward(x, false)));
  EXPECT_EQ(stack.runs, 2 * kLayers);
}

TEST(Recompute, ARegionThatReturnsItsInputIsRefused) {
  at::Tensor x = torch::randn({4}).requires_grad_(true);
  EXPECT_THROW(checkpoint([](const Tensors& in) { return in; }, Tensors{x}), std::invalid_argument);
}

// What the forward keeps for the backward, counted by the meter: the bytes
// still allocated after the forward, beside the input and the parameters.
TEST(Recompute, KeepsOnlyEachRegionsOutputsAndTheGeneratorsState) {
  auto& meter = distlab::memory::AllocatorMeter::install();
  const int64_t activation = kRows * kWidth * 4;  // one (rows, width) float32 tensor
  // The CPU generator's state (a Mersenne twister's), kept by each region
  // to draw its dropout masks again.
  const int64_t rng = at::globalContext().defaultGenerator(at::Device(at::kCPU)).get_state().nbytes();
  EXPECT_EQ(distlab::memory::generator_state_bytes(), rng);
  auto kept = [&](bool recompute) {
    Stack stack;
    at::Tensor x = torch::randn({kRows, kWidth}).requires_grad_(true);
    const int64_t before = meter.allocated();
    at::Tensor y = stack.forward(x, recompute);
    const int64_t after = meter.allocated() - before;
    y.sum().backward();
    return after;
  };
  // Plain, per layer: the Linear's output (GELU's backward reads it), the
  // dropout's mask (float32: LibTorch's CPU dropout multiplies by a float
  // mask) and its output (the next Linear's backward reads it as its input;
  // the last one is y). GELU's output is read by no backward: freed.
  EXPECT_EQ(kept(false), kLayers * 3 * activation);
  // Recomputed, per layer: its output (the next one's input) and the state.
  EXPECT_EQ(kept(true), kLayers * (activation + rng));
}

}  // namespace
