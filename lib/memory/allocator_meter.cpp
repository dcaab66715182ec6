#include "memory/allocator_meter.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "compat/torch.hpp"

#include <mutex>
#include <unordered_map>
#include <utility>

namespace distlab::memory {

namespace {

// Each allocation's DataPtr has the data itself as its context, as
// LibTorch's own CPU allocator does: raw_allocate() (which some CPU kernels
// use for scratch, gelu's among them) insists on it, and raw_deallocate()
// frees through raw_deleter(). What the inner allocator returned, and the
// bytes, are kept in a table by address until the data is freed. One per
// process (AllocatorMeter::install); its table is never destroyed, so that
// tensors freed while the process exits still find it.
class CountingAllocator final : public compat::Allocator {
 public:
  CountingAllocator(c10::Allocator* inner, AllocatorMeter* meter) {
    inner_ = inner;
    meter_ = meter;
  }

  c10::DataPtr allocate_bytes(size_t n) const override {
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

}  // namespace distlab::memory
