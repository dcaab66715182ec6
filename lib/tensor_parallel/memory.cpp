#include "tensor_parallel/memory.hpp"

#include <ATen/core/grad_mode.h>

#include "tensor_parallel/split.hpp"
#include "memory/allocator_meter.hpp"
#include "zero/memory.hpp"

namespace distlab::tensor_parallel {

namespace {

// The sizes t must divide, checked with the layers' own refusal.
void check_splits(const std::string& who, const LayerShape& shape, int t, bool sequence_parallel) {
  split_evenly(who + ": " + std::to_string(shape.hidden) + " hidden features", shape.hidden, t);
  split_evenly(who + ": " + std::to_string(shape.heads) + " heads", shape.heads, t);
  if (sequence_parallel)
    split_evenly(who + ": " + std::to_string(shape.seq) + " sequence rows", shape.seq, t);
}

}  // namespace

int64_t paper_activation_bytes(const LayerShape& shape, int t, bool sequence_parallel) {
  check_splits("paper_activation_bytes", shape, t, sequence_parallel);
  const int64_t sbh = shape.seq * shape.batch * shape.hidden;
  const int64_t attention = 5 * shape.heads * shape.seq * shape.seq * shape.batch;  // 5as^2b
  if (sequence_parallel) return (34 * sbh + attention) / t;                          // sbh/t (34 + 5as/h)
  return 10 * sbh + (24 * sbh + attention) / t;                                      // sbh (10 + 24/t + 5as/(ht))
}

ActivationBytes distlab_activation_bytes(const LayerShape& shape, int t, bool sequence_parallel, bool dropout,
                                         bool gelu) {
  check_splits("distlab_activation_bytes", shape, t, sequence_parallel);
  split_evenly("distlab_activation_bytes: " + std::to_string(shape.ffn) + " feed-forward features", shape.ffn, t);
  constexpr int64_t kFloat = 4;
  const int64_t u = shape.seq * shape.batch * shape.hidden;                 // U = sbh
  const int64_t f = shape.seq * shape.batch * shape.ffn;                    // F = sbf
  const int64_t a = shape.heads * shape.seq * shape.seq * shape.batch;      // A = as^2b
  const int64_t stats = 4 * shape.seq * shape.batch;                        // two norms' mean and 1/std
  // Replicated tensors (norm1's input, its output x, norm2's input, the
  // output; with dropout two noises); under sequence parallelism linear1
  // reads the gathered copy of x instead, and x itself is freed.
  const int64_t replicated = (dropout ? 6 : 4) - (sequence_parallel && t > 1 ? 1 : 0);
  const int64_t attention = dropout ? 3 : 1;           // softmax output (+ noise, dropped)
  const int64_t mlp = dropout ? 3 : (gelu ? 2 : 1);    // relu output (+ noise, dropped)
  ActivationBytes bytes;
  bytes.split = kFloat * (4 * u + mlp * f + attention * a) / t;
  bytes.replicated = kFloat * (replicated * u + stats) / (sequence_parallel ? t : 1);
  bytes.gathered = sequence_parallel && t > 1 ? kFloat * 2 * u : 0;
  return bytes;
}

int64_t measure_forward_bytes(comm::Communicator& world, const std::function<at::Tensor()>& forward) {
  memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
  const bool measuring = world.backend() != "threads" || world.rank() == 0;
  // Each reading of the meter sits between two barriers: no other rank of
  // this process allocates or frees while it is read.
  world.barrier();
  world.settle();
  const int64_t before = meter.allocated();
  world.barrier();
  int64_t kept = -1;
  {
    at::Tensor output;
    if (measuring) {
      output = forward();
    } else {
      at::NoGradGuard keep_nothing;
      forward();
    }
    world.barrier();
    world.settle();  // gloo's copies of sent data freed: not the forward's
    if (measuring) kept = meter.allocated() - before;
    world.barrier();
  }
  return kept;
}

}  // namespace distlab::tensor_parallel
