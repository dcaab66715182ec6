// Which rank owns which elements: ZeRO's layout, as plain data.
//
// The trainable parameters are packed into buckets exactly as DDP packs
// them (ddp/bucket_plan.hpp): each bucket is one flat buffer with its
// parameters at consecutive offsets. Every bucket is then cut into p chunks
// by the rule the library's reduce-scatter and all-gather use
// (collectives::chunk_range: the first numel % p chunks one element longer),
// and rank r owns chunk r of every bucket. So a bucket's reduce-scatter
// leaves each rank the gradient of exactly what it owns, and its all-gather
// fills every rank's buffer from the owners, for any numel and any p:
// chunks may be unequal, or empty.
//
// A rank's shard is its chunks one after the other, in bucket order:
//
//   p = 3      bucket 0 (10 elements)       bucket 1 (2 elements)
//   rank 0     [0, 4)                       [0, 1)     shard: 4 + 1 = 5
//   rank 1     [4, 7)                       [1, 2)     shard: 3 + 1 = 4
//   rank 2     [7, 10)                      [2, 2)     shard: 3 + 0 = 3
//
// With one bucket holding everything, rank r owns chunk_range(n, p, r) of
// the flat parameters: the textbook picture. Lessons print the layout, the
// trace records it, tests check it on paper. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/plan.hpp"
#include "ddp/bucket_plan.hpp"

namespace distlab::zero {

struct ShardLayout {
  ddp::BucketPlan plan;  // buckets are reduce-scattered and all-gathered in this order
  int world_size = 1;

  int buckets() const { return static_cast<int>(plan.buckets.size()); }
  // All elements of all buckets.
  int64_t numel() const;
  // The elements of bucket `bucket` that `rank` owns (offsets within the bucket).
  collectives::Range chunk(int bucket, int rank) const;
  // Where that chunk starts in `rank`'s shard.
  int64_t shard_offset(int bucket, int rank) const;
  // Elements `rank` owns: the length of its shard.
  int64_t shard_numel(int rank) const;

  // One line per rank: "rank 1: 4 elements = bucket 0 [4, 7) + bucket 1 [1, 2)".
  std::string text() const;
  // For trace args: {"world_size":3,"numel":12,"plan":{...},"shards":[[[0,4],[0,1]],...]}
  // (per rank, per bucket: [offset, count]).
  std::string json() const;
};

// Throws std::invalid_argument for world_size < 1.
ShardLayout make_shard_layout(ddp::BucketPlan plan, int world_size);

// The order parameters are packed into buckets: Zero1 reduces after
// backward, in registration order; Zero2 while backward runs, which meets
// the last layers' gradients first.
enum class BucketOrder { kRegistration, kBackward };

// ZeRO-1's and ZeRO-2's buckets: DDP's packing (ddp/bucket_plan.hpp) of the
// parameters, in registration order, taken in `order`. The planner's memory
// model packs the sizes it predicts with it.
ddp::BucketPlan plan_by_size(const std::vector<ddp::ParamInfo>& params, BucketOrder order, int64_t first_bytes,
                             int64_t cap_bytes);

}  // namespace distlab::zero
