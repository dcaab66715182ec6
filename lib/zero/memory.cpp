#include "zero/memory.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <mutex>
#include <unordered_map>

namespace distlab::zero {

std::vector<std::pair<std::string, int64_t>> MemoryUse::series() const {
  return {{"parameters", parameters},
          {"gradients", gradients},
          {"optimizer state", optimizer_state},
          {"buffers", buffers},
          {"activations", activations}};
}

std::string memory_counter(const std::string& who) { return "memory " + who; }
std::string accounting_counter(const std::string& who) { return "accounting " + who; }

void record_memory(trace::Recorder* recorder, int rank, const std::string& who, const MemoryUse& measured,
                   const MemoryUse& accounting) {
  if (recorder == nullptr || !recorder->enabled()) return;
  recorder->counter(rank, memory_counter(who), measured.series());
  recorder->counter(rank, accounting_counter(who), accounting.series());
}

const char* to_string(Stage stage) {
  switch (stage) {
    case Stage::kDdp:
      return "DDP";
    case Stage::kZero1:
      return "ZeRO-1";
    case Stage::kZero2:
      return "ZeRO-2";
    case Stage::kZero3:
      return "ZeRO-3";
  }
  return "?";
}

MemoryUse accounting(Stage stage, int64_t psi, int ranks, int64_t bytes, int64_t optimizer_bytes) {
  const int64_t p = ranks;
  MemoryUse m;
  m.parameters = bytes * psi / (stage == Stage::kZero3 ? p : 1);
  m.gradients = bytes * psi / (stage == Stage::kZero2 || stage == Stage::kZero3 ? p : 1);
  m.optimizer_state = optimizer_bytes * psi / (stage == Stage::kDdp ? 1 : p);
  return m;
}

namespace {

// The tensors one parameter's state holds, for each optimizer LibTorch has
// (LBFGS keeps its state per group, not per parameter).
std::vector<at::Tensor> state_tensors(const torch::optim::OptimizerParamState& state) {
  using namespace torch::optim;
  if (const auto* s = dynamic_cast<const SGDParamState*>(&state)) return {s->momentum_buffer()};
  if (const auto* s = dynamic_cast<const AdamParamState*>(&state))
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  if (const auto* s = dynamic_cast<const AdamWParamState*>(&state))
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  if (const auto* s = dynamic_cast<const AdagradParamState*>(&state)) return {s->sum()};
  if (const auto* s = dynamic_cast<const RMSpropParamState*>(&state))
    return {s->square_avg(), s->momentum_buffer(), s->grad_avg()};
  return {};
}

}  // namespace

int64_t StorageCounter::add(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return 0;
  if (!seen_.insert(t.storage().unsafeGetStorageImpl()).second) return 0;
  return static_cast<int64_t>(t.storage().nbytes());
}

MemoryUse measure_memory(const std::vector<at::Tensor>& parameters, const torch::optim::Optimizer* optimizer) {
  StorageCounter counted;
  MemoryUse m;
  for (const at::Tensor& p : parameters) m.parameters += counted.add(p);
  for (const at::Tensor& p : parameters) m.gradients += counted.add(p.grad());
  if (optimizer != nullptr)
    for (const auto& [key, state] : optimizer->state()) {
      for (const at::Tensor& t : state_tensors(*state)) m.optimizer_state += counted.add(t);
    }
  return m;
}

namespace {
void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}
}  // namespace

void StepPeaks::buffer_allocated(int64_t bytes) { raise_to(buffers_peak_, buffers_now_ += bytes); }

void StepPeaks::note_activations(int64_t bytes) { raise_to(activations_peak_, bytes); }

void StepPeaks::reset() {
  buffers_peak_ = buffers_now_.load();
  activations_peak_ = 0;
}

// ---- the counting allocator ----

namespace {

// Each allocation's DataPtr has the data itself as its context, as
// LibTorch's own CPU allocator does: raw_allocate() (which some CPU kernels
// use for scratch, gelu's among them) insists on it, and raw_deallocate()
// frees through raw_deleter(). What the inner allocator returned, and the
// bytes, are kept in a table by address until the data is freed. One per
// process (AllocatorMeter::install); its table is never destroyed, so that
// tensors freed while the process exits still find it.
class CountingAllocator final : public c10::Allocator {
 public:
  CountingAllocator(c10::Allocator* inner, AllocatorMeter* meter) {
    inner_ = inner;
    meter_ = meter;
  }

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    if (data == nullptr) return inner;  // nothing allocated (0 bytes): nothing to count
    const c10::Device device = inner.device();
    meter_->on_allocate(static_cast<int64_t>(n));
    {
      std::lock_guard<std::mutex> lock(table().mutex);
      table().live.emplace(data, Allocation{std::move(inner), static_cast<int64_t>(n)});
    }
    return {data, data, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  struct Allocation {
    c10::DataPtr inner;  // frees with the inner allocator's deleter
    int64_t bytes = 0;
  };
  struct Table {
    std::mutex mutex;
    std::unordered_map<void*, Allocation> live;
  };
  static Table& table() {
    static Table* table = new Table;
    return *table;
  }

  static void release(void* data) {
    Allocation allocation;
    {
      std::lock_guard<std::mutex> lock(table().mutex);
      auto it = table().live.find(data);
      if (it == table().live.end()) {
        // raw_allocate()d before install(): the inner allocator's to free.
        if (c10::DeleterFnPtr inner_raw = inner_->raw_deleter()) inner_raw(data);
        return;
      }
      allocation = std::move(it->second);
      table().live.erase(it);
    }
    meter_->on_free(allocation.bytes);
  }  // allocation.inner frees the bytes here, outside the lock

  static inline c10::Allocator* inner_ = nullptr;
  static inline AllocatorMeter* meter_ = nullptr;
};

}  // namespace

void AllocatorMeter::on_allocate(int64_t bytes) { raise_to(peak_, allocated_ += bytes); }

AllocatorMeter& AllocatorMeter::install() {
  static AllocatorMeter meter;
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator counting(c10::GetCPUAllocator(), &meter);
    c10::SetCPUAllocator(&counting, /*priority=*/100);
  });
  return meter;
}

}  // namespace distlab::zero
