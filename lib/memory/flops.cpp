// FLOP counts and the machine's matmul peak (memory/flops.hpp).
#include "memory/flops.hpp"

#include "memory/precision.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace distlab::memory {

int64_t layer_forward_flops(const FlopShape& s) {
  const int64_t d = s.width;
  return 2 * 4 * d * d + 2 * 2 * d * s.ffn + 2 * 2 * s.positions * d;
}

int64_t matmul_weights(const FlopShape& s) {
  return s.layers * (4 * s.width * s.width + 2 * s.width * s.ffn) + s.width * s.vocabulary;
}

int64_t model_flops_per_token(const FlopShape& s) {
  return 6 * matmul_weights(s) + 12 * s.layers * s.positions * s.width;
}

int64_t hardware_flops_per_token(const FlopShape& s, Recompute recompute) {
  // What runs a second time: every layer's products (full), the attention
  // core's two (selective: q k^T and the weights times v), none (matmuls:
  // their outputs are kept; the elementwise work is not counted).
  int64_t again = 0;
  if (recompute == Recompute::kFull) again = s.layers * layer_forward_flops(s);
  if (recompute == Recompute::kSelective) again = s.layers * 2 * 2 * s.positions * s.width;
  return model_flops_per_token(s) + again;
}

Utilisation utilisation(const FlopShape& shape, Recompute recompute, double tokens, double seconds, double peak) {
  Utilisation u;
  if (!(seconds > 0)) return u;
  u.tokens_per_second = tokens / seconds;
  u.model_flops_per_second = u.tokens_per_second * double(model_flops_per_token(shape));
  u.hardware_flops_per_second = u.tokens_per_second * double(hardware_flops_per_token(shape, recompute));
  if (peak > 0) {
    u.mfu = u.model_flops_per_second / peak;
    u.hfu = u.hardware_flops_per_second / peak;
  }
  return u;
}

double matmul_flops_per_second(int64_t n, int repeats, bool cuda, c10::ScalarType dtype) {
  return matmul_flops_per_second(n, repeats, cuda, dtype, [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  });
}

double matmul_flops_per_second(int64_t n, int repeats, bool cuda, c10::ScalarType dtype,
                               const std::function<double()>& now) {
  // float16 on the CPU: the emulated product (fp16_emulation.hpp), in float32 tensors.
  const bool emulated = !cuda && dtype == at::kHalf;
  std::optional<ComputeIn> fp16;
  if (emulated) fp16.emplace(Precision::kFp16, c10::DeviceType::CPU);
  const auto options = at::TensorOptions().dtype(emulated ? at::kFloat : dtype).device(cuda ? at::kCUDA : at::kCPU);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::mm(a, b);  // untimed: the first call sets up
  double best = 0;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    if (cuda) c.cpu();  // waits for the device
    const double start = now();
    c = at::mm(a, b);
    if (cuda) (void)c.sum().item<float>();  // the product is done once its sum is
    const double seconds = now() - start;
    best = std::max(best, 2.0 * n * n * n / seconds);
  }
  return best;
}

}  // namespace distlab::memory
