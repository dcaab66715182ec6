// What a rank holds, measured, and what the ZeRO paper says it should.
//
// Measured, not computed: every tensor's storage is asked how many bytes it
// holds right now (a freed ZeRO-3 unit holds 0), and each storage is counted
// once (parameters that are views of one flat buffer share it). By ZeRO's
// categories:
//   parameters       the storages of the parameters given (the model's, and
//                    ZeRO's shard where it is a copy of them)
//   gradients        their .grad storages
//   optimizer state  every tensor in the optimizer's state (momentum, Adam's
//                    exp_avg and exp_avg_sq, ...)
//   buffers          communication buffers held outside the parameters and
//                    gradients (a flat bucket waiting for its collective)
//   activations      what forward allocated and kept for backward, at its
//                    peak: the CPU allocator's peak during forward above
//                    what was allocated when forward began (memory::AllocatorMeter)
//
// The accounting (ZeRO paper, section 3, for fp32 Adam: 4 + 4 + 8 bytes per
// parameter), Psi parameters on p ranks:
//   DDP      4 Psi      + 4 Psi      + 8 Psi
//   ZeRO-1   4 Psi      + 4 Psi      + 8 Psi / p
//   ZeRO-2   4 Psi      + 4 Psi / p  + 8 Psi / p
//   ZeRO-3   4 Psi / p  + 4 Psi / p  + 8 Psi / p
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "trace/recorder.hpp"

namespace distlab::zero {

struct MemoryUse {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t buffers = 0;
  int64_t activations = 0;

  int64_t model_states() const { return parameters + gradients + optimizer_state; }
  int64_t total() const { return model_states() + buffers + activations; }
  // {{"parameters", ...}, {"gradients", ...}, {"optimizer state", ...},
  // {"buffers", ...}, {"activations", ...}}: a trace counter sample's series.
  std::vector<std::pair<std::string, int64_t>> series() const;
};

// In a trace, a rank's memory is a counter sample named "memory " + who
// ("memory ZeRO-2"), and the paper's accounting for the same rank a sample
// named "accounting " + who: one counter track per stage, which Perfetto
// draws as it is and the visualizer's memory view puts side by side.
std::string memory_counter(const std::string& who);
std::string accounting_counter(const std::string& who);
// Both samples on `rank` (when `recorder` is tracing).
void record_memory(trace::Recorder* recorder, int rank, const std::string& who, const MemoryUse& measured,
                   const MemoryUse& accounting);

enum class Stage { kDdp, kZero1, kZero2, kZero3 };
const char* to_string(Stage stage);

// The paper's bytes for `psi` parameters of `bytes` each on `ranks` ranks,
// with `optimizer_bytes` of state per parameter (SGD with momentum: 4,
// Adam: 8). Activations are not part of it (0).
MemoryUse accounting(Stage stage, int64_t psi, int ranks, int64_t bytes = 4, int64_t optimizer_bytes = 8);

// Counts each storage once, however many tensors share it.
class StorageCounter {
 public:
  // The bytes `t`'s storage holds now, or 0 if it was counted before (or `t` is undefined).
  int64_t add(const at::Tensor& t);

 private:
  std::unordered_set<const void*> seen_;
};

// Parameters and their .grad, and the optimizer's state (optimizer may be null).
MemoryUse measure_memory(const std::vector<at::Tensor>& parameters, const torch::optim::Optimizer* optimizer);

// What lives only during part of a step, at its most since the last
// reset(): communication buffers that come and go (ZeRO-2's bucket from
// its first gradient to its reduce-scatter, ZeRO-3's flattened unit
// gradient), counted as they are allocated and freed, and the activations
// a forward left for backward, as the caller measured them (note_activations:
// e.g. a memory::AllocatorMeter's bytes before and after forward). Thread-safe:
// the comm thread frees buffers while backward allocates more.
class StepPeaks {
 public:
  void buffer_allocated(int64_t bytes);
  void buffer_freed(int64_t bytes) { buffers_now_ -= bytes; }
  void note_activations(int64_t bytes);
  int64_t buffers() const { return buffers_peak_.load(); }
  int64_t activations() const { return activations_peak_.load(); }
  // Peaks from here on start from what is held now.
  void reset();

 private:
  std::atomic<int64_t> buffers_now_{0}, buffers_peak_{0}, activations_peak_{0};
};

}  // namespace distlab::zero
