// Activation recomputation (gradient checkpointing): a region of the forward
// whose intermediate results are not kept for the backward but computed
// again when the backward reaches it.
//
// checkpoint(fn, inputs) runs fn(inputs) with gradients off, so nothing fn
// computes inside is kept; it keeps only the inputs (and the random
// generator's state). Its outputs get one node in the autograd graph, a
// Recompute node, whose backward
//   1. runs fn again on the same inputs, with gradients on, in the forward's
//      precision (memory/precision.hpp), after setting
//      the default generators (the CPU's, and the GPU's of the inputs) to
//      the state they had in the forward: dropout draws the same masks;
//   2. computes the gradients of the inputs and of every parameter that
//      second graph reaches (torch::autograd::grad), and hands each
//      parameter's to its gradient accumulator as the engine would, its
//      hooks around it: .grad sums as in a plain backward and DDP's
//      reducer sees each gradient arrive;
//   3. hands the inputs' gradients on to the nodes before.
// The memory fn's intermediates took is needed once, region by region,
// instead of for the whole forward; the price is a second forward of the
// region (the Ultra-Scale Playbook: about 30-40 % more compute for every
// layer, a few percent for attention's core alone).
//
// LibTorch has no checkpoint (torch.utils.checkpoint is Python). Why not a
// plain backward() inside the node, as PyTorch's first (reentrant)
// checkpoint did: that is a graph task of its own, and what a parameter's
// hook queues for the end of the backward (DDP's reducer checks that every
// parameter got its gradient) would run at the end of that inner task,
// before the layers below the region have theirs.
// The naive version beside it is no version at all: fn(inputs), everything
// kept (recompute_test.cpp compares the two bit for bit).
//
// The generators are the process's defaults, shared by every thread: thread
// ranks that draw random numbers while another recomputes do not get
// reproducible masks (with dropout on, thread ranks are not reproducible
// anyway); one rank per process is.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace distlab::memory {

// What a model recomputes in the backward instead of keeping: nothing;
// every layer whole (each layer's input kept, everything inside it
// computed again); the attention core (selective: the s x s tensors); or
// everything but the matrix products' outputs (matmuls). The layers'
// policies are models/encoder_layer.hpp's.
enum class Recompute { kNone, kFull, kSelective, kMatmuls };
const char* to_string(Recompute policy);  // "none", "full", "selective", "matmuls"
Recompute recompute_from(const std::string& text);  // throws std::invalid_argument naming the choices
// Whether the policy's recomputed regions hold parameters (full: the whole
// layer; matmuls: the norms): their gradients then come out of the
// region's own backward, together with its input's, so a backward cannot
// be split into the input's part and the parameters' part (the
// zero-bubble schedules' B and W) for them.
bool recomputes_parameters(Recompute policy);

using Tensors = std::vector<at::Tensor>;
// A region of the forward: the same inputs must give the same outputs, up
// to the random draws, every time it runs. Its outputs must be tensors it
// computed, not its inputs themselves.
using Region = std::function<Tensors(const Tensors&)>;

// fn(inputs), its intermediate results computed again in the backward
// instead of kept. Under no_grad it is fn(inputs). `also`: generators of
// its own the region draws from besides the default ones (tensor
// parallelism's masks drawn alike on every rank of a group), saved and
// set back for the recomputation as the default ones are, and after it
// left where they were.
Tensors checkpoint(const Region& fn, const Tensors& inputs, const std::vector<at::Generator>& also = {});

// Whether this thread is inside a recomputation (a Recompute node running
// its region the second time): what a region records once per forward
// (the experts' token counts) is not recorded again.
bool recomputing();
// How many regions this process has run a second time so far (every
// thread's): the evidence that a run recomputed, for tests and lessons.
int64_t regions_recomputed();

// The bytes of the CPU generator's state each recomputed region keeps
// (LibTorch's size: 5056 in 1.13).
int64_t generator_state_bytes();

// One input, one output.
at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input,
                      const std::vector<at::Generator>& also = {});

}  // namespace distlab::memory
