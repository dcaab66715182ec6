#include "ddp/distributed_sampler.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>
#include <string>

namespace distlab::ddp {

DistributedSampler::DistributedSampler(int64_t dataset_size, int replicas, int rank, SamplerOptions options)
    : size_(dataset_size), replicas_(replicas), rank_(rank), options_(options) {
  if (replicas < 1 || rank < 0 || rank >= replicas)
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank) + " must be in [0, " +
                                std::to_string(replicas) + ")");
  if (dataset_size < 0) throw std::invalid_argument("DistributedSampler: negative dataset size");
  if (options_.drop_last && size_ % replicas_ != 0)
    num_samples_ = (size_ - replicas_ + replicas_ - 1) / replicas_;  // ceil((n - replicas) / replicas)
  else
    num_samples_ = (size_ + replicas_ - 1) / replicas_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all;
  if (options_.shuffle) {
    // The same generator and call as torch.randperm(n, generator=g) with
    // g.manual_seed(seed + epoch): the same permutation as Python's.
    auto generator = at::detail::createCPUGenerator(options_.seed + static_cast<uint64_t>(epoch_));
    at::Tensor perm = at::randperm(size_, generator, at::kLong);
    all.assign(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + size_);
  } else {
    for (int64_t i = 0; i < size_; ++i) all.push_back(i);
  }
  const int64_t total = total_size();
  if (!options_.drop_last) {
    // Pad by repeating from the start (more than once if the list is short).
    for (int64_t i = 0; static_cast<int64_t>(all.size()) < total && size_ > 0; ++i) all.push_back(all[i % size_]);
  } else {
    all.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += replicas_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace distlab::ddp
