#include "zero/zero1.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>


namespace distlab::zero {

Zero1::Zero1(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
             ZeroOptions options)
    : sharded_(comm, module, make_optimizer, options, Stage::kZero1, pack_by_size(options, BucketOrder::kRegistration),
               ShardStorage::kViewsOfParameters) {}

void Zero1::zero_grad() {
  for (const at::Tensor& p : sharded_.params()) p.mutable_grad() = at::Tensor();
  sharded_.zero_shard_grad();
  reduced_ = false;
}

void Zero1::reduce_gradients() {
  if (reduced_) return;
  torch::NoGradGuard no_grad;
  const ShardLayout& layout = sharded_.layout();
  for (int b = 0; b < layout.buckets(); ++b)  // (bucket numel,) local gradients / p: summed over ranks, the average
    sharded_.reduce_scatter_bucket(b, flat_gradients(layout, b, sharded_.params(), 1.0 / sharded_.comm().size()),
                                   "reduce-scatter bucket " + std::to_string(b));
  reduced_ = true;
}

double Zero1::clip_grad_norm(double max_norm) {
  reduce_gradients();
  return sharded_.clip_grad_norm(max_norm);
}

void Zero1::step() {
  reduce_gradients();
  sharded_.step();
  reduced_ = false;
}

}  // namespace distlab::zero
