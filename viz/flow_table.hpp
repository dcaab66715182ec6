// Flow id -> (send event, recv event): the model's table of send->recv
// pairs. Open addressing in one array instead of std::unordered_map's node
// per entry: a million-event file inserts 800,000 ids, and chasing a node
// pointer per insert was a tenth of the time to open it.
//
// An entry is 16 bytes (event indices are uint32, as everywhere in the
// model) and the array may have any length, so reserve() sizes it to what a
// file can need instead of the next power of two: for the 1 M-event trace
// 10.7 MB, where 24-byte entries in a power-of-two array took 25 MB (viz/README.md,
// Performance).
#pragma once

#include <cstdint>
#include <vector>

namespace distlab::viz {

class FlowTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;  // no send (recv) seen yet
  struct Entry {
    uint64_t id = 0;  // 0: empty (flow ids are never 0)
    uint32_t send = kNone;
    uint32_t recv = kNone;
  };

  // The entry of `id`, added as (kNone, kNone) when new. id != 0.
  Entry& at(uint64_t id) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow(slots_.size() * 2);
    Entry& e = slots_[find_slot(id)];
    if (e.id == 0) {
      e.id = id;
      ++size_;
    }
    return e;
  }
  // Null when absent.
  const Entry* find(uint64_t id) const {
    if (size_ == 0 || id == 0) return nullptr;
    const Entry& e = slots_[find_slot(id)];
    return e.id == id ? &e : nullptr;
  }
  // Asks the cache for the slot where `id`'s search starts (a hint only).
  void prefetch(uint64_t id) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(id)]);
  }
  // Room for `entries` ids in all without moving the table.
  void reserve(size_t entries) {
    if (entries * 4 > slots_.size() * 3) grow(entries * 4 / 3 + 1);
  }
  void clear() {
    slots_.clear();
    size_ = 0;
  }
  size_t size() const { return size_; }
  // Slots in the array (at most 3/4 of them used): what the table costs.
  size_t capacity() const { return slots_.size(); }
  // Every entry, in no particular order.
  template <typename F>
  void for_each(F f) const {
    for (const Entry& e : slots_)
      if (e.id != 0) f(e);
  }

 private:
  // Fibonacci hashing, then the product's high half picks one of n slots
  // (n need not be a power of two): sequential or strided ids from a
  // hand-written file spread as well as the sink's random-looking ones.
  size_t home(uint64_t id) const {
    const uint64_t mixed = id * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>((static_cast<unsigned __int128>(mixed) * slots_.size()) >> 64);
  }
  size_t find_slot(uint64_t id) const {
    const size_t n = slots_.size();
    size_t i = home(id);
    while (slots_[i].id != 0 && slots_[i].id != id)
      if (++i == n) i = 0;
    return i;
  }
  void grow(size_t at_least) {
    const size_t n = at_least < 16 ? 16 : at_least;
    if (n <= slots_.size()) return;
    std::vector<Entry> old = std::move(slots_);
    slots_.assign(n, Entry{});
    for (const Entry& e : old)
      if (e.id != 0) slots_[find_slot(e.id)] = e;
  }

  std::vector<Entry> slots_;  // empty, or at least 16 and at most 3/4 full
  size_t size_ = 0;
};

}  // namespace distlab::viz
