// Flow id -> (send event, recv event): the model's table of send->recv
// pairs. Open addressing in one array instead of std::unordered_map's node
// per entry: a million-event file inserts 800,000 ids, and chasing a node
// pointer per insert was a tenth of the time to open it.
#pragma once

#include <cstdint>
#include <vector>

namespace distlab::viz {

class FlowTable {
 public:
  struct Entry {
    uint64_t id = 0;  // 0: empty (flow ids are never 0)
    int64_t send = -1;
    int64_t recv = -1;
  };

  // The entry of `id`, added as (-1, -1) when new. id != 0.
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
  void reserve(size_t entries) {
    if (entries * 4 > slots_.size() * 3) grow(entries * 4 / 3 + 1);
  }
  void clear() {
    slots_.clear();
    size_ = 0;
  }
  size_t size() const { return size_; }
  // Every entry, in no particular order.
  template <typename F>
  void for_each(F f) const {
    for (const Entry& e : slots_)
      if (e.id != 0) f(e);
  }

 private:
  size_t find_slot(uint64_t id) const {
    // Flow ids are already well mixed (splitmix64): the low bits serve.
    const size_t mask = slots_.size() - 1;
    size_t i = static_cast<size_t>(id) & mask;
    while (slots_[i].id != 0 && slots_[i].id != id) i = (i + 1) & mask;
    return i;
  }
  void grow(size_t at_least) {
    size_t n = 16;
    while (n < at_least) n *= 2;
    if (n <= slots_.size()) return;
    std::vector<Entry> old = std::move(slots_);
    slots_.assign(n, Entry{});
    for (const Entry& e : old)
      if (e.id != 0) slots_[find_slot(e.id)] = e;
  }

  std::vector<Entry> slots_;  // size 0 or a power of two, at most 3/4 full
  size_t size_ = 0;
};

}  // namespace distlab::viz
