// Mixed precision: the matrix products in a 16-bit type, everything the
// optimizer sees in float32.
//
// How DistLab does it is PyTorch's automatic mixed precision (autocast):
// the parameters stay float32 (they are the master weights), and inside a
// ComputeIn guard each operation that gains from 16 bits (linear, matmul,
// bmm, ...) casts its float32 inputs, weights included, to the compute type
// and returns a 16-bit result, while the operations that need range or
// precision (layer norm, softmax's statistics, the loss) run in float32.
// The cast is an operation in the graph like any other: its backward casts
// the 16-bit gradient back, so every parameter's gradient arrives in
// float32 and sums across microbatches in float32 (.grad), DDP and ZeRO
// reduce float32 buckets, the norm is clipped and the optimizer steps in
// float32. What shrinks is what the forward keeps for the backward (the
// products' inputs and outputs in 2 bytes an element) and the time of the
// products, where the hardware has 16-bit units.
//
// The other layout, Megatron's and the Ultra-Scale Playbook's table: the
// model's parameters themselves in 16 bits (2 bytes), their gradients in
// 16 bits (2) or accumulated in float32 (4), and a float32 copy (4) the
// optimizer updates. Autocast trades those 2 + 2 bytes a parameter for a
// 16-bit copy of each weight made in the forward and kept by the product
// that read it until its backward.
//
// bf16 has float32's 8 exponent bits (the same range, 3 significant
// digits): gradients neither overflow nor vanish, no loss scaling needed.
// fp16 has 5 exponent bits (at most 65504; below 6e-8 a gradient is 0):
// it needs the loss multiplied up before the backward and the gradients
// divided back before the step (loss_scaler.hpp). LibTorch's CPU kernels
// have no float16 matrix product: on the CPU fp16's products are emulated
// (fp16_emulation.hpp: float16's values and range, float32's bytes).
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace distlab::memory {

enum class Precision { kFp32, kBf16, kFp16 };
const char* to_string(Precision precision);          // "fp32", "bf16", "fp16"
Precision precision_from(const std::string& text);   // throws std::invalid_argument naming the choices
c10::ScalarType compute_dtype(Precision precision);  // kFloat, kBFloat16, kHalf

// Throws std::invalid_argument saying what works when `device` cannot
// compute in `precision` (fp16 on the CPU, where this LibTorch leaves no
// room for its emulation).
void check_precision(Precision precision, c10::DeviceType device);

// Autocast's settings on this thread (they are per thread: thread ranks
// each have their own).
struct AutocastState {
  bool cpu = false, gpu = false;
  c10::ScalarType cpu_dtype = c10::kBFloat16, gpu_dtype = c10::kHalf;
  bool cache = true;
  bool fp16_emulated = false;  // the CPU's float16 products emulated (fp16_emulation.hpp)
  static AutocastState current();
  void apply() const;
};

// Puts `state` in place for its scope, and back what was there after.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state) : before_(AutocastState::current()) { state.apply(); }
  ~AutocastScope() { before_.apply(); }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  AutocastState before_;
};

// Within its scope, this thread computes in `precision` on `device`
// (nothing changes for kFp32). Autocast's cache of cast weights is off:
// each weight is read once per forward here, and a cached copy made with
// gradients off (a recomputed region's first forward) would lose its
// history. Guards nest; the outermost one restores what was there.
class ComputeIn {
 public:
  ComputeIn(Precision precision, c10::DeviceType device);
  ~ComputeIn();
  ComputeIn(const ComputeIn&) = delete;
  ComputeIn& operator=(const ComputeIn&) = delete;

 private:
  AutocastState before_;
  bool active_ = false;
};

}  // namespace distlab::memory
