// The two things processes share in a same-host segment (comm/shm_links.hpp):
//
// - A Ring: a single-producer, single-consumer byte queue. The producer
//   alone moves `head` (bytes written so far), the consumer alone moves
//   `tail` (bytes taken); each on a cache line of its own, so the two sides
//   never write the same line. The producer publishes with a release store
//   of head after copying the bytes in, the consumer reads head with
//   acquire before copying them out (and the other way round for tail), so
//   one side copies a chunk in while the other copies the previous one out.
//
// - A Bell: a counter a process sleeps on (a futex, so the kernel wakes it
//   from another process) when waiting has gone on past a short spin. A
//   peer rings it after it wrote to or read from a ring this process uses;
//   the futex call is made only when somebody sleeps.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace distlab::comm::shm {

inline constexpr size_t kCacheLine = 64;

struct Bell {
  std::atomic<uint32_t> count{0};
  std::atomic<uint32_t> sleepers{0};

  uint32_t seen() const { return count.load(); }
  // Wakes every sleeper.
  void ring();
  // Sleeps until the count moves past `seen`, or `limit` passes.
  void sleep(uint32_t seen, std::chrono::microseconds limit);
};

// How many single-copy messages may wait for their acknowledgement on one
// channel (comm/shm_links.cpp).
inline constexpr uint64_t kAckSlots = 64;

// One direction of one pair of ranks, in the receiver's segment.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
  // A single-copy message's number, once its receiver has read it: slot
  // n % kAckSlots holds n.
  alignas(kCacheLine) std::atomic<uint64_t> acks[kAckSlots];
};

class Ring {
 public:
  Ring() = default;
  Ring(RingControl* control, uint8_t* data, uint64_t capacity) : control_(control), data_(data), capacity_(capacity) {}

  RingControl* control() const { return control_; }
  uint64_t capacity() const { return capacity_; }

  // Producer side.
  uint64_t writable() const {
    return capacity_ -
           (control_->head.load(std::memory_order_relaxed) - control_->tail.load(std::memory_order_acquire));
  }
  void write(const void* from, uint64_t bytes) {
    const uint64_t head = control_->head.load(std::memory_order_relaxed);
    copy_around(head, static_cast<const uint8_t*>(from), bytes, /*in=*/true, nullptr);
    control_->head.store(head + bytes, std::memory_order_release);
  }

  // Consumer side. `into` null: the bytes are dropped.
  uint64_t readable() const {
    return control_->head.load(std::memory_order_acquire) - control_->tail.load(std::memory_order_relaxed);
  }
  void read(void* into, uint64_t bytes) {
    const uint64_t tail = control_->tail.load(std::memory_order_relaxed);
    if (into != nullptr) copy_around(tail, nullptr, bytes, /*in=*/false, static_cast<uint8_t*>(into));
    control_->tail.store(tail + bytes, std::memory_order_release);
  }

 private:
  // Copies `bytes` at ring position `at`, in two pieces where it wraps.
  void copy_around(uint64_t at, const uint8_t* from, uint64_t bytes, bool in, uint8_t* into) const {
    const uint64_t offset = at % capacity_;
    const uint64_t first = std::min(bytes, capacity_ - offset);
    if (in) {
      std::memcpy(data_ + offset, from, first);
      std::memcpy(data_, from + first, bytes - first);
    } else {
      std::memcpy(into, data_ + offset, first);
      std::memcpy(into + first, data_, bytes - first);
    }
  }

  RingControl* control_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t capacity_ = 0;
};

}  // namespace distlab::comm::shm
