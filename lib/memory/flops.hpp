// What a training step computes, in floating-point operations, and how close
// a run comes to what the machine can do: model FLOPs utilisation (MFU) and
// hardware FLOPs utilisation (HFU, which counts recomputation too).
//
// A matrix product of (m x k) by (k x n) costs 2 m k n FLOPs (a multiply and
// an add per term). Per token, through one encoder layer of width d,
// feed-forward width f, attending s positions, the forward computes
//   q, k, v and the output projection   2 x 4 d^2
//   the feed-forward's two products     2 x 2 d f
//   the scores q k^T and their use on v 2 x 2 s d
// and the backward twice the forward (the gradients of the inputs and of
// the weights). Over a model whose products hold N weights (every layer's
// and the decoder's; an embedding looks up, it does not multiply), a token
// costs 6 N + 12 L s d in all: the count the Ultra-Scale Playbook and
// picotron use (with f = 4d a layer's products hold 12 d^2 weights). The
// scores here are every position's (the tutorial's model attends the whole
// window); a causal model needs half of them, which the count leaves in, as
// the Playbook's does.
//
// Full recomputation runs every layer's forward a second time: the hardware
// does 2 N_layers + 4 L s d more per token than the model needs; selective
// recomputation only the attention core's two products, 4 L s d; keeping
// the matmuls' outputs, no product again.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>

#include "memory/recompute.hpp"

namespace distlab::memory {

struct FlopShape {
  int64_t width = 0;       // d
  int64_t ffn = 0;         // f, the feed-forward's inner width
  int64_t layers = 0;      // L
  int64_t positions = 0;   // s, the positions each token attends (the sequence length)
  int64_t vocabulary = 0;  // the decoder's outputs (0: no decoder)
};

// One token through one layer's forward.
int64_t layer_forward_flops(const FlopShape& shape);
// The weights the model's matrix products hold: L (4 d^2 + 2 d f), and the
// decoder's d x vocabulary.
int64_t matmul_weights(const FlopShape& shape);
// Model FLOPs per token, forward and backward: 6 N + 12 L s d.
int64_t model_flops_per_token(const FlopShape& shape);
// What the hardware computes per token: the model's, plus the products the
// recomputation runs again.
int64_t hardware_flops_per_token(const FlopShape& shape, Recompute recompute);

// FLOP/s a square matrix product of side n reaches here (the best of
// `repeats` timed products after one untimed), on the CPU or a GPU, in
// `dtype` (float32, or the 16-bit type mixed precision computes in;
// float16 on the CPU: its emulation, fp16_emulation.hpp).
double matmul_flops_per_second(int64_t n = 1024, int repeats = 5, bool cuda = false,
                               c10::ScalarType dtype = c10::kFloat);
// The same on the clock `now` (seconds), read just before and just after
// each timed product: 2 n^3 over the shortest of the `repeats` intervals.
// The one above passes std::chrono::steady_clock; a test passes a clock of
// its own to check the formula exactly.
double matmul_flops_per_second(int64_t n, int repeats, bool cuda, c10::ScalarType dtype,
                               const std::function<double()>& now);

// How close a run came to the hardware: `tokens` trained in `seconds` on
// devices whose matmul peaks add up to `peak` FLOP/s.
struct Utilisation {
  double tokens_per_second = 0;
  double model_flops_per_second = 0;     // tokens/s x model FLOPs per token
  double hardware_flops_per_second = 0;  // tokens/s x hardware FLOPs per token (recomputation included)
  double mfu = 0;                        // model FLOP/s over the peak
  double hfu = 0;                        // hardware FLOP/s over the peak
};
Utilisation utilisation(const FlopShape& shape, Recompute recompute, double tokens, double seconds, double peak);

}  // namespace distlab::memory
