// float16 products emulated on the CPU (memory/fp16_emulation.hpp), each
// against an independent reference:
//   - every product (mm, addmm, bmm, baddbmm, linear, and matmul and
//     torch::nn's linear, which come down to them) gives float16 values within one float16 step of
//     the product of the float16-rounded operands computed in double;
//     outside the guard, and on another thread inside it, products are
//     float32's own;
//   - the gradients reaching the parameters are float16 values in float32
//     tensors: a gradient above 65504 becomes inf and one below 6e-8
//     becomes 0, where float32 keeps both;
//   - a recomputed region runs emulated again (the guard's state is saved
//     with autocast's), bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <thread>

#include "memory/fp16_emulation.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"

namespace {

using distlab::memory::ComputeIn;
using distlab::memory::Precision;

constexpr auto kCpu = c10::DeviceType::CPU;

// Every element a float16 value (unchanged by the round trip); NaN fails.
bool float16_values(const at::Tensor& t) { return at::equal(t, t.to(at::kHalf).to(at::kFloat)); }

at::Tensor in_double_of_halves(const at::Tensor& t) { return t.to(at::kHalf).to(at::kDouble); }

// |got - want| within one float16 step of want (2^-10 of its magnitude,
// or of float16's smallest normal below it); false on NaN.
bool within_one_half_step(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor step = at::clamp_min(want.abs(), 6.1e-5) * std::ldexp(1.0, -10);
  return (got.to(at::kDouble) - want).abs().le(step).all().item<bool>();
}

TEST(Fp16Emulation, ProductsGiveFloat16ValuesOfTheRoundedOperands) {
  ASSERT_TRUE(distlab::memory::fp16_emulation_available());
  torch::manual_seed(31);
  const at::Tensor a = torch::randn({6, 9}) * 3, b = torch::randn({9, 5}), bias = torch::randn({5});
  const at::Tensor a3 = torch::randn({4, 6, 9}), b3 = torch::randn({4, 9, 5}), c3 = torch::randn({4, 6, 5});
  const at::Tensor w = torch::randn({5, 9});  // linear's weight (out, in)
  struct Case {
    std::string name;
    at::Tensor got, want;
  };
  std::vector<Case> cases;
  const at::Tensor float32_product = at::mm(a, b);  // before the guard
  {
    ComputeIn guard(Precision::kFp16, kCpu);
    EXPECT_TRUE(distlab::memory::fp16_emulated());
    EXPECT_FALSE(distlab::memory::AutocastState::current().cpu) << "fp16 on the CPU turned bf16's autocast on";
    const auto h = in_double_of_halves;
    cases.push_back({"mm", at::mm(a, b), at::mm(h(a), h(b))});
    cases.push_back({"addmm", at::addmm(bias, a, b), at::addmm(h(bias), h(a), h(b))});
    cases.push_back({"bmm", at::bmm(a3, b3), at::bmm(h(a3), h(b3))});
    cases.push_back({"baddbmm", at::baddbmm(c3, a3, b3), at::baddbmm(h(c3), h(a3), h(b3))});
    cases.push_back({"linear", at::linear(a3, w, bias), at::matmul(h(a3), h(w).t()) + h(bias)});
    // torch::nn's linear on 3-D inputs: a matmul, then the bias added in place (in float32 here).
    cases.push_back({"torch::nn linear 3-D", torch::nn::functional::linear(a3, w), at::matmul(h(a3), h(w).t())});
    cases.push_back({"matmul", at::matmul(a3, b), at::matmul(h(a3), h(b))});
    at::Tensor other;
    std::thread([&] { other = at::mm(a, b); }).join();  // another thread: its own, float32
    EXPECT_TRUE(at::equal(other, float32_product)) << "another thread's product is not float32's";
    EXPECT_FALSE(float16_values(other)) << "another thread's product ran emulated";
  }
  EXPECT_FALSE(distlab::memory::fp16_emulated()) << "the guard left the emulation on";
  for (const Case& c : cases) {
    EXPECT_EQ(c.got.scalar_type(), at::kFloat) << c.name;
    EXPECT_TRUE(float16_values(c.got)) << c.name << ": not float16 values";
    EXPECT_TRUE(within_one_half_step(c.got, c.want)) << c.name;
  }
  EXPECT_FALSE(float16_values(at::mm(a, b))) << "outside the guard the product is float16's too";
}

at::Tensor input() {
  torch::manual_seed(32);
  return torch::randn({4, 16});
}

// One linear layer's weight gradient under fp16 and fp32, the loss (the
// sum of its outputs) times `scale`.
at::Tensor weight_gradient(Precision precision, double scale) {
  const at::Tensor x = input();
  torch::nn::Linear layer(16, 8);
  at::Tensor out;
  {
    ComputeIn guard(precision, kCpu);
    out = layer(x);
  }
  (out.sum() * scale).backward();  // outside the guard, as the trainer's
  EXPECT_EQ(layer->weight.scalar_type(), at::kFloat);
  return layer->weight.grad();
}

TEST(Fp16Emulation, GradientsAreFloat16ValuesOverflowingAndUnderflowingAsFloat16s) {
  // d(sum of x W^T + b)/dW[i][j] = the sum over rows of x[.][j]: of x's float16 values.
  const at::Tensor g16 = weight_gradient(Precision::kFp16, 1.0);
  const at::Tensor want = in_double_of_halves(input()).sum(0).expand({8, 16});
  EXPECT_EQ(g16.scalar_type(), at::kFloat);
  EXPECT_TRUE(float16_values(g16));
  EXPECT_TRUE(within_one_half_step(g16, want));
  // The loss times 1e6: float32's gradients reach about 1e6, float16 has at most 65504.
  EXPECT_TRUE(weight_gradient(Precision::kFp32, 1e6).isfinite().all().item<bool>());
  EXPECT_TRUE(weight_gradient(Precision::kFp16, 1e6).isinf().any().item<bool>()) << "no overflow in float16";
  // Times 1e-9: float16's smallest step is 6e-8.
  EXPECT_TRUE(weight_gradient(Precision::kFp32, 1e-9).ne(0).all().item<bool>());
  EXPECT_TRUE(weight_gradient(Precision::kFp16, 1e-9).eq(0).all().item<bool>()) << "no underflow in float16";
}

TEST(Fp16Emulation, ARecomputedRegionRunsEmulatedAgain) {
  auto run = [](bool recompute, Precision precision) {
    torch::manual_seed(33);
    torch::nn::TransformerEncoderLayer layer(
        torch::nn::TransformerEncoderLayerOptions(32, 2).dim_feedforward(64).dropout(0.3));
    const at::Tensor x = torch::randn({6, 2, 32}).requires_grad_(true);
    torch::manual_seed(34);
    at::Tensor out;
    {
      ComputeIn guard(precision, kCpu);
      out = recompute ? distlab::memory::checkpoint([&](const at::Tensor& h) { return layer(h); }, x) : layer(x);
    }
    out.pow(2).sum().backward();
    std::vector<at::Tensor> g{out.detach(), x.grad().clone()};
    for (const auto& p : layer->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto plain = run(false, Precision::kFp16), again = run(true, Precision::kFp16),
             fp32 = run(false, Precision::kFp32);
  ASSERT_EQ(plain.size(), again.size());
  bool differs_from_fp32 = false;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(at::equal(plain[i], again[i])) << "tensor " << i << " recomputed otherwise";
    differs_from_fp32 = differs_from_fp32 || !at::equal(plain[i], fp32[i]);
  }
  EXPECT_TRUE(differs_from_fp32) << "float32 gives the same: the check cannot tell";
}

}  // namespace
