#include "zero/shard_layout.hpp"

#include <numeric>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace distlab::zero {

ShardLayout make_shard_layout(ddp::BucketPlan plan, int world_size) {
  if (world_size < 1) throw std::invalid_argument("ZeRO shard layout: world size " + std::to_string(world_size) + " < 1");
  ShardLayout layout;
  layout.plan = std::move(plan);
  layout.world_size = world_size;
  return layout;
}

ddp::BucketPlan plan_by_size(const std::vector<ddp::ParamInfo>& params, BucketOrder order, int64_t first_bytes,
                             int64_t cap_bytes) {
  const int n = static_cast<int>(params.size());
  std::vector<int> packing(static_cast<size_t>(n));
  std::iota(packing.begin(), packing.end(), 0);
  if (order == BucketOrder::kBackward) packing = ddp::reverse_registration_order(n);
  return ddp::plan_buckets(params, packing, first_bytes, cap_bytes);
}

int64_t ShardLayout::numel() const {
  int64_t n = 0;
  for (const ddp::Bucket& b : plan.buckets) n += b.numel;
  return n;
}

collectives::Range ShardLayout::chunk(int bucket, int rank) const {
  return collectives::chunk_range(plan.buckets.at(static_cast<size_t>(bucket)).numel, world_size, rank);
}

int64_t ShardLayout::shard_offset(int bucket, int rank) const {
  int64_t offset = 0;
  for (int b = 0; b < bucket; ++b) offset += chunk(b, rank).count;
  return offset;
}

int64_t ShardLayout::shard_numel(int rank) const { return shard_offset(buckets(), rank); }

std::string ShardLayout::text() const {
  std::ostringstream out;
  for (int r = 0; r < world_size; ++r) {
    out << "rank " << r << ": " << shard_numel(r) << " elements";
    for (int b = 0; b < buckets(); ++b) {
      const collectives::Range c = chunk(b, r);
      out << (b == 0 ? " = " : " + ") << "bucket " << b << " [" << c.offset << ", " << c.offset + c.count << ")";
    }
    out << "\n";
  }
  return out.str();
}

std::string ShardLayout::json() const {
  std::ostringstream out;
  out << "{\"world_size\":" << world_size << ",\"numel\":" << numel() << ",\"plan\":" << plan.json()
      << ",\"shards\":[";
  for (int r = 0; r < world_size; ++r) {
    out << (r ? "," : "") << "[";
    for (int b = 0; b < buckets(); ++b) {
      const collectives::Range c = chunk(b, r);
      out << (b ? "," : "") << "[" << c.offset << "," << c.count << "]";
    }
    out << "]";
  }
  out << "]}";
  return out.str();
}

}  // namespace distlab::zero
