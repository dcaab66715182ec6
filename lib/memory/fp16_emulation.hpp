// float16 matrix products on the CPU, emulated: what fp16 mixed precision
// does to the numbers, where LibTorch's CPU kernels have no float16 matrix
// product (addmm is not implemented for Half in LibTorch 1.13).
//
// A GPU's tensor cores read float16 operands, multiply them exactly and
// accumulate in float32, and write a float16 result; autocast casts each
// product's float32 inputs (weights included) to float16 and the backward
// casts each float16 gradient back. The emulation does the same to the
// values: each product (mm, bmm, addmm, baddbmm: what matmul and the
// attention come down to, and linear whole, its bias included, as autocast
// takes it) rounds its operands to float16, multiplies
// in float32 (a product of two float16 numbers is exact in float32), and
// rounds its result to float16; the rounding is a pair of casts, float32
// to float16 and back, so autograd records it, and in the backward the
// same casts round the gradient reaching the product and the gradients it
// hands back. Every product's inputs, outputs and gradients are float16
// values, with float16's range: a value above 65504 becomes inf, a
// gradient below 6e-8 becomes 0; the loss scaler (loss_scaler.hpp) has the
// same work to do as on a GPU.
//
// What differs from a GPU: the tensors stay float32 (4 bytes an element:
// fp16's memory is not emulated), and the work between the products
// (residual sums, relu, dropout) runs in float32 on float16 values, where
// a GPU's autocast leaves some of it in float16. One such place: LibTorch's
// C++ linear (torch::nn::Linear, the attention's projections) on a 3-D
// input is a matmul and then its bias added in place; on a GPU that add
// stays in the matmul's float16, here the bias is added in float32.
//
// How: an autocast dispatcher key LibTorch leaves without kernels
// (compat/torch.hpp: AutocastXPU in 1.13, AutocastIPU in 2.x, where
// AutocastXPU has LibTorch's own; above autograd like every autocast key)
// gets these five kernels and a fallthrough for every other operation,
// registered once, the first time they are asked for. A thread computes in
// emulated float16 while the key is in its included set (per thread: thread
// ranks each have their own), which ComputeIn (precision.hpp) puts there for
// fp16 on the CPU.
#pragma once

namespace distlab::memory {

// Whether this LibTorch lets the emulation register (it does not when the
// key already has kernels, e.g. a backend's autocast registered on it);
// registers on the first call.
bool fp16_emulation_available();

// This thread's products emulated in float16 (on), or not.
bool fp16_emulated();
void set_fp16_emulated(bool on);

}  // namespace distlab::memory
