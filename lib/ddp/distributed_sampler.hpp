// Which samples each replica sees: torch.utils.data.DistributedSampler's
// rules, index for index.
//
// - num_samples = ceil(n / replicas) per rank; the list is padded by
//   repeating its start so every rank gets as many (or, with drop_last,
//   cut to floor(n / replicas) per rank);
// - with shuffle, the order is torch.randperm(n) from a generator seeded
//   with seed + epoch: call set_epoch(e) every epoch, or every epoch sees
//   the same order;
// - rank r takes positions r, r + replicas, r + 2 replicas, ...
//
// The test holds it equal to PyTorch's own sampler.
#pragma once

#include <cstdint>
#include <vector>

namespace distlab::ddp {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int replicas, int rank, SamplerOptions options = {});
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * replicas_; }
  // This rank's indices for the current epoch.
  std::vector<int64_t> indices() const;

 private:
  int64_t size_;
  int replicas_;
  int rank_;
  SamplerOptions options_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
};

}  // namespace distlab::ddp
