// Which gradients travel together: DDP's bucket plan, as plain data.
//
// All-reducing every gradient on its own pays the latency of one message per
// parameter; all-reducing all of them at once waits for the last gradient
// before anything moves. Buckets sit between: gradients are packed into
// flat buffers of about `cap` bytes, and a bucket is all-reduced as soon as
// its last gradient is ready, while backward goes on with the rest.
//
// How PyTorch's reducer assigns them, and what DistLab does:
// - parameters are taken in a given order (grouped by dtype and device: a
//   bucket is one flat buffer of one dtype); a bucket closes once it reaches
//   its limit, so it may overshoot by one tensor;
// - the limits are first_bytes for the first bucket, then cap for the rest
//   (PyTorch: 1 MiB and 25 MiB), so that the first all-reduce starts early;
// - before the first step nothing is known about the order gradients become
//   ready, so the order is the reverse of registration (backward visits the
//   last layers first). PyTorch >= 1.13 instead runs its first iteration as
//   one bucket (without find_unused_parameters) and older versions assigned
//   in registration order then reversed the list (the small bucket last);
//   DistLab buckets the first step already, so it overlaps from step one;
// - after the first step the buckets are rebuilt in the order gradients
//   actually became ready, with the same limits.
//
// The plan is printed by the lessons, written to the trace, and drawn by
// the visualizer. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distlab::ddp {

inline constexpr int64_t kMiB = 1024 * 1024;
inline constexpr int64_t kDefaultBucketCapBytes = 25 * kMiB;
inline constexpr int64_t kDefaultFirstBucketBytes = 1 * kMiB;

struct ParamInfo {
  std::string name;
  int64_t numel = 0;
  int64_t element_size = 4;  // bytes
  std::string dtype = "float";
  std::string device = "cpu";
  int64_t bytes() const { return numel * element_size; }
};

struct Bucket {
  std::vector<int> params;  // indices into BucketPlan::params, in packing order
  int64_t bytes = 0;
  int64_t numel = 0;
  int64_t limit = 0;        // the limit this bucket was filled to
};

struct BucketPlan {
  std::vector<ParamInfo> params;
  std::vector<Bucket> buckets;  // all-reduced in this order
  std::vector<int> order;       // the parameter order the plan was made from

  // bucket_of[i]: the bucket of parameter i; offset_of[i]: its first element in it.
  std::vector<int> bucket_of() const;
  std::vector<int64_t> offset_of() const;
  // One line per bucket: "bucket 0  1.00 MiB  3 params: fc3.bias fc3.weight fc2.bias".
  std::string text() const;
  // Compact JSON for trace args: {"buckets":[{"bytes":..,"params":[..]},..],"names":[..],"sizes":[..]}.
  std::string json() const;
};

// Packs params in `order` (a permutation of 0..n-1) with limits first_bytes,
// then cap_bytes. cap_bytes <= 0 means one bucket per parameter.
BucketPlan plan_buckets(const std::vector<ParamInfo>& params, const std::vector<int>& order, int64_t first_bytes,
                        int64_t cap_bytes);

// n-1, n-2, ..., 0: the order used before any step has run.
std::vector<int> reverse_registration_order(int n);

// Throws std::invalid_argument unless `order` is a permutation of 0..n-1.
void check_order(const std::vector<int>& order, int n);

}  // namespace distlab::ddp
