// Activation memory of one Transformer layer on one tensor rank: what the
// paper counts, what DistLab's ParallelEncoderLayer keeps in float32, and a
// measurement of it.
//
// The paper (Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models", section 4 and Table 2), bytes per layer per
// rank for s sequence, b batch, h hidden, a heads, t tensor ranks:
//
//   unsplit                          sbh (34 + 5as/h)
//   tensor parallel                  sbh (10 + 24/t + 5as/(ht))
//   tensor + sequence parallel       sbh/t (34 + 5as/h)
//
// It counts 16-bit activations (2 bytes an element) and dropout masks of 1
// byte an element, for Megatron's pre-norm GPT layer (feed-forward 4h,
// GeLU, no dropout inside the MLP), without recomputation:
//
//   attention  QKV input 2sbh, Q and K 4sbh, softmax output 2as^2b, its
//              dropout mask as^2b, the dropped weights 2as^2b, V 2sbh, the
//              output projection's input 2sbh, the dropout mask after it sbh
//   MLP        first linear's input 2sbh, GeLU's input 8sbh, second linear's
//              input 8sbh, the dropout mask after it sbh
//   norms      each LayerNorm's input, 2sbh twice
//
// Tensor parallelism divides what lies inside the region (Q, K, V, the
// attention's s x s tensors, the projection's input, the MLP's wide
// tensors: 24sbh + 5as^2b) by t and leaves the rest (10sbh) whole on every
// rank; sequence parallelism divides that too.
//
// DistLab's form. ParallelEncoderLayer (torch's TransformerEncoderLayer cut
// up: post-norm, relu or gelu, feed-forward f, dropout p) on LibTorch's CPU
// kernels, float32 (4 bytes an element). Going through its forward, what
// stays allocated when forward returns (what autograd saved for backward,
// and the output, which the caller holds), in elements, U = sbh, F = sbf,
// A = as^2b:
//
//   split by t (inside the region)
//     q (scaled), k, v                 3U/t   bmm saves them
//     the heads' mixed values           U/t   the output projection's input
//     softmax output                    A/t   softmax saves its result
//     its dropout noise, dropped        2A/t  (p > 0) noise kept by mul, the
//                                             dropped weights by bmm
//     relu output                       F/t   relu saves its result (gelu
//                                             its input, and with p = 0 its
//                                             output is linear2's: 2F/t)
//     dropout noise, dropped            2F/t  (p > 0) torch's layer has a
//                                             dropout inside the MLP
//   replicated (outside the region; under sequence parallelism my S/t rows)
//     norm1's input, norm2's input      2U    the residual sums
//     norm1's output x                  U     linear1's input (not kept under
//                                             sequence parallelism: linear1
//                                             keeps the gathered copy)
//     the output                        U     the next layer's QKV input
//     two dropout noises                2U    (p > 0) after attention, MLP
//     the norms' mean and 1/std         4sb
//   gathered (sequence parallelism, t > 1)
//     the layer's input and x, whole    2U    what the QKV and linear1 read
//
// Nothing else survives: the scores, the masked scores, the unscaled q, the
// row-parallel partial sums and their sums before the bias are freed as
// soon as the next operation has read them. In bytes (x 4), with r = 6,
// k = 3 when the dropouts run (p > 0, training), r = 4, k = 1 otherwise
// (with gelu and no dropout, the MLP's k is 2):
//
//   tensor parallel      4 (r U + 4sb) + 4 (4U + kF + kA)/t
//   + sequence parallel  4 ((r-1) U + 4sb)/t + 4 (4U + kF + kA)/t + 4 x 2U   (t > 1)
//
// What differs from the paper, term by term:
//   - 4 bytes an element, not 2;
//   - a dropout mask is LibTorch's float noise tensor (4 bytes an element,
//     the kept values scaled by 1/(1-p)), not 1 byte;
//   - relu keeps its output, which is also linear2's input when p = 0
//     (one tensor where GeLU has two); torch's layer drops out inside the
//     MLP, a third F-sized tensor;
//   - with f = 2h (the capstone's) the MLP keeps half of f = 4h's;
//   - post-norm: the paper's QKV input is the layer's input; here it is
//     the previous layer's output, counted as "the output";
//   - under sequence parallelism DistLab keeps the two all-gathered inputs
//     whole (2U, which does not shrink with t): autograd saves the gathered
//     tensor the linear read. Megatron-LM keeps only this rank's rows and
//     all-gathers them again in backward. (In a stack, the next layer then
//     keeps its gathered copy of this layer's output, and the output itself,
//     U/t, is freed once read; the measurement below, one layer, holds it.)
#pragma once

#include <cstdint>
#include <functional>

#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"

namespace distlab::tensor_parallel {

// One layer's activation shapes (the paper's letters, and f).
struct LayerShape {
  int64_t seq = 0;     // s
  int64_t batch = 0;   // b
  int64_t hidden = 0;  // h
  int64_t heads = 0;   // a
  int64_t ffn = 0;     // f: the feed-forward width (the paper's 4h)
};

// The paper's bytes per layer per rank (table above). t = 1 gives the
// unsplit layer's with or without sequence parallelism. Throws
// std::invalid_argument, naming the sizes, when t does not divide h and a
// (and s, with sequence parallelism).
int64_t paper_activation_bytes(const LayerShape& shape, int t, bool sequence_parallel);

// DistLab's float32 bytes, by where they live.
struct ActivationBytes {
  int64_t split = 0;       // inside the region: divided by t
  int64_t replicated = 0;  // outside it: whole, or divided by t under sequence parallelism
  int64_t gathered = 0;    // sequence parallelism: the all-gathered inputs kept whole (0 when t = 1)
  int64_t total() const { return split + replicated + gathered; }
};

// What ParallelEncoderLayer's forward keeps (the derivation above); dropout:
// whether the dropouts run (p > 0 and training); gelu: the layer's
// activation (else relu, torch's default and the capstone's).
ActivationBytes distlab_activation_bytes(const LayerShape& shape, int t, bool sequence_parallel, bool dropout,
                                         bool gelu = false);

// Measured: the bytes the process's CPU allocator (memory::AllocatorMeter)
// holds after forward() returns, with its output still held, minus before.
// Every rank of `world` calls it, the tensor groups' collectives inside
// forward(). With a process per rank (gloo) each rank measures its own
// forward and returns it. Thread ranks share one allocator, so only one
// rank's forward can be measured at a time: world rank 0 measures its own
// while the others run theirs under a NoGradGuard and let go of the output
// before the measurement is read (they keep nothing), and return -1. CPU
// tensors only.
int64_t measure_forward_bytes(comm::Communicator& world, const std::function<at::Tensor()>& forward);

}  // namespace distlab::tensor_parallel
