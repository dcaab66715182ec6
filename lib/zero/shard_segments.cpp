#include "zero/shard_segments.hpp"

#include <algorithm>

namespace distlab::zero {

std::vector<Segment> shard_segments(const ShardLayout& layout, int rank) {
  std::vector<Segment> segments;
  const std::vector<int64_t> offset_of = layout.plan.offset_of();  // each parameter's first element in its bucket
  for (int b = 0; b < layout.buckets(); ++b) {
    const collectives::Range chunk = layout.chunk(b, rank);
    const int64_t chunk_end = chunk.offset + chunk.count;
    for (int i : layout.plan.buckets[static_cast<size_t>(b)].params) {
      const int64_t first = offset_of[static_cast<size_t>(i)];
      const int64_t end = first + layout.plan.params[static_cast<size_t>(i)].numel;
      const int64_t from = std::max(first, chunk.offset), to = std::min(end, chunk_end);
      if (from < to) segments.push_back({i, from - first, to - from, b, from - chunk.offset});
    }
  }
  return segments;
}

Overlap overlap(const Segment& a, const Segment& b) {
  if (a.param != b.param) return {};
  const int64_t from = std::max(a.offset, b.offset);
  const int64_t to = std::min(a.offset + a.length, b.offset + b.length);
  return from < to ? Overlap{from, to - from} : Overlap{};
}

}  // namespace distlab::zero
