// The scope of no_sync(), shared by DistributedDataParallel, ZeRO-2 and
// ZeRO-3: while the guard lives, backward leaves gradients in .grad without
// any communication; when it ends, synchronization is on again and the next
// backward reduces the sum. Movable (it can live in a std::optional), not
// copyable: one guard, one "on again".
#pragma once

#include <functional>
#include <utility>

namespace distlab::ddp {

class NoSyncGuard {
 public:
  // Calls set_sync(false) now and set_sync(true) when the guard ends.
  explicit NoSyncGuard(std::function<void(bool sync)> set_sync) : set_sync_(std::move(set_sync)) { set_sync_(false); }
  NoSyncGuard(NoSyncGuard&& other) noexcept : set_sync_(std::exchange(other.set_sync_, nullptr)) {}
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;
  ~NoSyncGuard() {
    if (set_sync_) set_sync_(true);
  }

 private:
  std::function<void(bool sync)> set_sync_;
};

}  // namespace distlab::ddp
