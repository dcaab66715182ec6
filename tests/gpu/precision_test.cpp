// Products in 16 bits on the device against the CPU: fp16 under CUDA's
// autocast against the CPU's emulation (memory/fp16_emulation.hpp claims
// tensor cores' values: operands rounded to float16, the product summed in
// float32, the result rounded), and bf16 under CUDA's autocast against
// the CPU's. Both round a float32 sum, so they agree within one step of the
// 16-bit type at the result's magnitude, plus what two orders of a float32
// sum may differ by; where an input is added to the product (addmm's,
// baddbmm's, linear's), one may round the product before adding it, so the
// step is taken at |result| + |added| (on an H200, baddbmm's results that
// nearly cancel differed by 56 fp16 and 128 bf16 steps of their own size). Then the capstone trained in bf16 and in fp16
// (with the loss scaler) on the device against the same on the CPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "capstone_runs.hpp"
#include "gpu_device.hpp"
#include "memory/fp16_emulation.hpp"
#include "memory/precision.hpp"
#include "support/differences.hpp"
#include "train/trainer.hpp"

namespace distlab {
namespace {

using memory::Precision;

struct Product {
  const char* name;
  int64_t summed;  // terms in each output's sum
  int added;       // the input added to the product, or -1
  std::function<at::Tensor(const std::vector<at::Tensor>&)> run;
  std::vector<std::vector<int64_t>> shapes;
};

const std::vector<Product>& products() {
  static const std::vector<Product> all = {
      {"mm", 96, -1, [](const auto& t) { return at::mm(t[0], t[1]); }, {{40, 96}, {96, 24}}},
      {"addmm", 96, 2, [](const auto& t) { return at::addmm(t[2], t[0], t[1]); }, {{40, 96}, {96, 24}, {24}}},
      {"bmm", 64, -1, [](const auto& t) { return at::bmm(t[0], t[1]); }, {{3, 20, 64}, {3, 64, 16}}},
      {"baddbmm", 64, 2, [](const auto& t) { return at::baddbmm(t[2], t[0], t[1]); },
       {{3, 20, 64}, {3, 64, 16}, {3, 20, 16}}},
      {"linear", 48, 2, [](const auto& t) { return at::linear(t[0], t[1], t[2]); }, {{5, 7, 48}, {32, 48}, {32}}},
  };
  return all;
}

// Input i of the product, in float64 on the CPU (the same values everywhere).
at::Tensor input_of(const Product& p, size_t i) {
  const at::Tensor x = at::arange(1, 1 + c10::multiply_integers(p.shapes[i]), at::kDouble);
  return x.mul(0.7071 + 0.37 * static_cast<double>(i)).sin().mul(3).view(p.shapes[i]);
}

// The product of its float32 inputs on `device`, under `precision`.
at::Tensor product_on(const Product& p, Precision precision, c10::DeviceType device) {
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < p.shapes.size(); ++i)
    inputs.push_back(input_of(p, i).to(device == c10::DeviceType::CUDA ? at::Device(at::kCUDA) : at::Device(at::kCPU),
                                       at::kFloat));
  memory::ComputeIn guard(precision, device);
  return p.run(inputs).to(at::kCPU, at::kDouble);
}

// |result| + |the input added|, where each step is counted.
at::Tensor magnitude_of(const Product& p, const at::Tensor& want) {
  if (p.added < 0) return want.abs();
  return want.abs() + input_of(p, static_cast<size_t>(p.added)).abs().expand_as(want);
}

// One step of the 16-bit type at `magnitude`, and two float32 sums of `summed` terms apart.
bool within_a_step(const at::Tensor& got, const at::Tensor& want, const at::Tensor& magnitude, Precision precision,
                   int64_t summed, double* worst_in_steps) {
  const double mantissa = precision == Precision::kFp16 ? 0x1p-10 : 0x1p-7;
  const at::Tensor step = magnitude.mul(mantissa).clamp_min(0x1p-24);
  const at::Tensor sums = want.abs().mul(2.0 * static_cast<double>(summed) * 0x1p-24);
  const at::Tensor excess = (got - want).abs().div(step + sums);
  *worst_in_steps = test_support::as_difference(excess.max().item<double>());
  return test_support::within(*worst_in_steps, 1.0);
}

TEST(GpuPrecision, ProductsIn16BitsOnTheDeviceMatchTheCpu) {
  DISTLAB_GPU_TEST_DEVICE();
  const c10::DeviceType device = gpu_tests::device_type_under_test();
  for (const Precision precision : {Precision::kFp16, Precision::kBf16}) {
    if (precision == Precision::kFp16 && !memory::fp16_emulation_available()) {
      std::printf("  fp16: this LibTorch leaves the CPU no key for its emulation: nothing to compare against\n");
      continue;
    }
    for (const Product& p : products()) {
      const at::Tensor want = product_on(p, precision, c10::DeviceType::CPU);
      const at::Tensor got = product_on(p, precision, device);
      ASSERT_EQ(got.sizes(), want.sizes()) << p.name;
      double worst = 0;
      EXPECT_TRUE(within_a_step(got, want, magnitude_of(p, want), precision, p.summed, &worst))
          << p.name << " in " << memory::to_string(precision) << ": " << worst << " steps apart";
      std::printf("  %-8s %s on %s against the cpu: at most %.2f of a %s step apart, %s\n", p.name,
                  memory::to_string(precision), c10::DeviceTypeName(device, true).c_str(), worst,
                  memory::to_string(precision), at::equal(got, want) ? "equal" : "not equal");
    }
  }
}

// The capstone in bf16, and in fp16 with the loss scaler, on the device
// against the CPU: the losses of 5 steps within 2 % (a product's value
// differs by a 16-bit step between the two; a wrong cast or scale is
// off by far more; a NaN or an infinity fails).
TEST(GpuPrecision, TheCapstoneIn16BitsTrainsAsOnTheCpu) {
  DISTLAB_GPU_TEST_DEVICE();
  const std::string device = gpu_tests::device_under_test();
  for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
    if (precision == Precision::kFp16 && !memory::fp16_emulation_available()) continue;  // said above
    train::TrainerOptions o = tests::tiny_options(2, 2);
    o.plan.memory.precision = precision;
    o.plan.memory.loss_scaling = precision == Precision::kFp16;
    const auto cpu = tests::run_threads(o, tests::small_corpus(), 0, "cpu");
    const auto dev = tests::run_threads(o, tests::small_corpus(), 0, device);
    test_support::Worst worst;
    for (size_t r = 0; r < cpu.size(); ++r) {
      ASSERT_EQ(dev[r].step_losses.size(), cpu[r].step_losses.size()) << "rank " << r;
      for (size_t s = 0; s < cpu[r].step_losses.size(); ++s)
        worst.add((dev[r].step_losses[s] - cpu[r].step_losses[s]) / cpu[r].step_losses[s]);
    }
    std::printf("  capstone 2x2 in %s on %s against the cpu: losses within %.2e\n", memory::to_string(precision),
                device.c_str(), worst.value);
    EXPECT_TRUE(test_support::within(worst.value, 2e-2)) << memory::to_string(precision) << ": " << worst.value;
  }
}

}  // namespace
}  // namespace distlab
