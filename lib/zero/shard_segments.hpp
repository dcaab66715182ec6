// What a rank's shard holds, in the model's own terms: segments of
// parameters, independent of buckets and of the number of ranks.
//
// A shard is a chunk of every bucket (shard_layout.hpp), and a chunk is a
// range of a flat buffer that may start in the middle of one parameter and
// end in the middle of another. Cut at the parameters' boundaries, a chunk
// becomes segments (parameter, first element, length) of the flattened
// parameters. Every parameter lies in exactly one bucket and a chunk is one
// range of it, so a rank holds at most one segment of each parameter:
//
//   p = 3, one bucket [w (6 elements) | b (3 elements)], chunks of 3
//   rank 0   chunk [0, 3)   w [0, 3)
//   rank 1   chunk [3, 6)   w [3, 6)
//   rank 2   chunk [6, 9)   b [0, 3)
//
// The segments of all ranks tile every parameter exactly once, whatever the
// buckets and the world size. That is what makes a sharded checkpoint
// re-shardable: p writers save their segments; q readers each compute their
// own segments under their own layout and copy the overlaps from the
// writers' (sharded_checkpoint.hpp). No LibTorch here.
#pragma once

#include <cstdint>
#include <vector>

#include "zero/shard_layout.hpp"

namespace distlab::zero {

struct Segment {
  int param = 0;             // index into layout.plan.params (registration order)
  int64_t offset = 0;        // its first element in the flattened parameter
  int64_t length = 0;        // > 0
  int bucket = 0;            // the bucket (ZeRO-3: unit) the parameter is in
  int64_t chunk_offset = 0;  // where the segment starts in the rank's chunk of that bucket
};

// `rank`'s non-empty segments, in shard order (bucket by bucket, and within
// a bucket in packing order).
std::vector<Segment> shard_segments(const ShardLayout& layout, int rank);

// The elements [offset, offset + length) of one flattened parameter that
// two segments of it share; length 0 when they do not meet.
struct Overlap {
  int64_t offset = 0;
  int64_t length = 0;
};
Overlap overlap(const Segment& a, const Segment& b);

}  // namespace distlab::zero
