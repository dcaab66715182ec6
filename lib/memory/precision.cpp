// Mixed precision's settings and guard (memory/precision.hpp).
#include "memory/precision.hpp"

#include <ATen/autocast_mode.h>

#include "compat/torch.hpp"
#include "memory/fp16_emulation.hpp"

#include <stdexcept>

namespace distlab::memory {

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

Precision precision_from(const std::string& text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  throw std::invalid_argument("precision: '" + text + "' is not one (fp32, bf16, fp16)");
}

c10::ScalarType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return c10::kFloat;
    case Precision::kBf16: return c10::kBFloat16;
    case Precision::kFp16: return c10::kHalf;
  }
  return c10::kFloat;
}

void check_precision(Precision precision, c10::DeviceType device) {
  if (precision == Precision::kFp16 && device == c10::DeviceType::CPU && !fp16_emulation_available())
    throw std::invalid_argument(
        "precision fp16: LibTorch's CPU kernels have no float16 matrix product, and this LibTorch leaves no key for "
        "its emulation (memory/fp16_emulation.hpp); on the CPU use bf16 (float32's range, no loss scaling needed), "
        "fp16 on CUDA");
}

AutocastState AutocastState::current() {
  AutocastState s;
  s.cpu = compat::autocast_enabled(c10::DeviceType::CPU);
  s.gpu = compat::autocast_enabled(c10::DeviceType::CUDA);
  s.cpu_dtype = compat::autocast_dtype(c10::DeviceType::CPU);
  s.gpu_dtype = compat::autocast_dtype(c10::DeviceType::CUDA);
  s.cache = at::autocast::is_autocast_cache_enabled();
  s.fp16_emulated = memory::fp16_emulated();
  return s;
}

void AutocastState::apply() const {
  compat::set_autocast_enabled(c10::DeviceType::CPU, cpu);
  compat::set_autocast_enabled(c10::DeviceType::CUDA, gpu);
  compat::set_autocast_dtype(c10::DeviceType::CPU, cpu_dtype);
  compat::set_autocast_dtype(c10::DeviceType::CUDA, gpu_dtype);
  at::autocast::set_autocast_cache_enabled(cache);
  if (fp16_emulated != memory::fp16_emulated()) set_fp16_emulated(fp16_emulated);
}

ComputeIn::ComputeIn(Precision precision, c10::DeviceType device) : before_(AutocastState::current()) {
  if (precision == Precision::kFp32) return;
  check_precision(precision, device);
  AutocastState on = before_;
  if (device == c10::DeviceType::CUDA) {
    on.gpu = true, on.gpu_dtype = compute_dtype(precision);
  } else if (precision == Precision::kFp16) {
    on.fp16_emulated = true;  // no CPU float16 product: emulated (fp16_emulation.hpp)
  } else {
    on.cpu = true, on.cpu_dtype = compute_dtype(precision);
  }
  on.cache = false;
  on.apply();
  at::autocast::increment_nesting();
  active_ = true;
}

ComputeIn::~ComputeIn() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  before_.apply();
}

}  // namespace distlab::memory
