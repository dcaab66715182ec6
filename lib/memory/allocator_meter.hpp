// What the process allocates on the CPU, counted as it happens.
//
// Used to measure what a forward keeps for backward (the peak during
// forward above what was allocated when it began): ZeRO's memory table
// (zero/memory.hpp), tensor parallelism's (tensor_parallel/memory.hpp) and
// lesson 12.
#pragma once

#include <atomic>
#include <cstdint>

namespace distlab::memory {

// Sets `peak` to `value` when it is higher, from any thread.
inline void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

// The process's CPU allocations, counted: install() puts a counting
// allocator in front of LibTorch's CPU allocator (once per process; what was
// allocated before is not seen, so call it before building the model).
// Process-wide: with one rank per process (distlab-run, torchrun, mpirun)
// it is that rank's.
class AllocatorMeter {
 public:
  static AllocatorMeter& install();
  int64_t allocated() const { return allocated_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(allocated_.load()); }

  void on_allocate(int64_t bytes);
  void on_free(int64_t bytes) { allocated_ -= bytes; }

 private:
  AllocatorMeter() = default;
  std::atomic<int64_t> allocated_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace distlab::memory
