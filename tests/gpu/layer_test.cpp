// The encoder layer's recomputation policies (models/encoder_layer.hpp) on
// the device, dropout on: each policy gives LibTorch's own layer's output,
// input gradient and parameter gradients bit for bit, in float32 and in
// 16 bits (bf16, and fp16 on a GPU). The recomputation must draw the same
// dropout masks from the device's generator as the first forward did.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gpu_device.hpp"
#include "memory/precision.hpp"
#include "models/encoder_layer.hpp"

namespace distlab {
namespace {

using memory::Precision;
using memory::Recompute;

constexpr int64_t kSeq = 12, kBatch = 3, kWidth = 32, kHeads = 4, kFfn = 64;

struct Outcome {
  at::Tensor out, input_grad;
  std::vector<at::Tensor> grads;
};

// has_policy false: LibTorch's own forward.
Outcome run(bool has_policy, Recompute policy, Precision precision, c10::DeviceType device_type) {
  const at::Device device(device_type);
  torch::manual_seed(7);
  torch::nn::TransformerEncoderLayer layer(
      torch::nn::TransformerEncoderLayerOptions(kWidth, kHeads).dim_feedforward(kFfn).dropout(0.3));
  layer->to(device);
  torch::manual_seed(8);
  const at::Tensor src = torch::randn({kSeq, kBatch, kWidth}).to(device).requires_grad_(true);
  const at::Tensor mask =
      at::triu(at::full({kSeq, kSeq}, -std::numeric_limits<float>::infinity()), 1).to(device);
  torch::manual_seed(9);  // the dropout masks: the CPU's generator and the device's
  at::Tensor out;
  {
    memory::ComputeIn guard(precision, device_type);
    out = has_policy ? models::run_encoder_layer(*layer, src, mask, policy) : layer(src, mask);
  }
  (out.to(at::kFloat) * out.detach().to(at::kFloat).sin()).sum().backward();
  Outcome o{out.detach().cpu(), src.grad().cpu(), {}};
  for (const auto& p : layer->parameters()) o.grads.push_back(p.grad().cpu());
  return o;
}

TEST(GpuLayer, EveryRecomputationPolicyGivesLibTorchsLayerBitForBit) {
  DISTLAB_GPU_TEST_DEVICE();
  gpu_tests::make_kernels_deterministic();
  const c10::DeviceType device = gpu_tests::device_type_under_test();
  std::vector<Precision> precisions = {Precision::kFp32, Precision::kBf16};
  if (device == c10::DeviceType::CUDA) precisions.push_back(Precision::kFp16);
  for (const Precision precision : precisions) {
    const Outcome torch_layer = run(false, Recompute::kNone, precision, device);
    ASSERT_TRUE(torch_layer.out.isfinite().all().item<bool>()) << memory::to_string(precision);
    for (const Recompute policy : {Recompute::kNone, Recompute::kFull, Recompute::kSelective, Recompute::kMatmuls}) {
      const Outcome mine = run(true, policy, precision, device);
      const std::string name = std::string(memory::to_string(policy)) + " in " + memory::to_string(precision) +
                               " on " + c10::DeviceTypeName(device, true);
      EXPECT_TRUE(torch::equal(mine.out, torch_layer.out)) << name << ": output";
      EXPECT_TRUE(torch::equal(mine.input_grad, torch_layer.input_grad)) << name << ": input gradient";
      ASSERT_EQ(mine.grads.size(), torch_layer.grads.size());
      for (size_t i = 0; i < mine.grads.size(); ++i)
        EXPECT_TRUE(torch::equal(mine.grads[i], torch_layer.grads[i])) << name << ": parameter " << i;
    }
  }
}

}  // namespace
}  // namespace distlab
