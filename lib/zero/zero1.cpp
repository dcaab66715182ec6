#include "zero/zero1.hpp"

#include <string>

namespace distlab::zero {

Zero1::Zero1(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
             ZeroOptions options)
    : sharded_(comm, module, make_optimizer, options, Stage::kZero1, pack_by_size(options, BucketOrder::kRegistration),
               ShardStorage::kViewsOfParameters) {
  sharded_.use_gradient_buffers();
}

void Zero1::zero_grad() {
  sharded_.zero_gradient_buffers();
  reduced_ = false;
}

void Zero1::reduce_gradients() {
  if (reduced_) return;
  for (int b = 0; b < sharded_.layout().buckets(); ++b)
    sharded_.reduce_scatter_gradient_buffer(b, "reduce-scatter bucket " + std::to_string(b));
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
