#include "zero/zero1.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "collectives/collectives.hpp"

namespace distlab::zero {

Zero1::Zero1(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
             ZeroOptions options)
    : sharded_(comm, module, make_optimizer, options, "ZeRO-1", BucketOrder::kRegistration) {}

void Zero1::zero_grad() {
  for (const at::Tensor& p : sharded_.params()) p.mutable_grad() = at::Tensor();
  sharded_.zero_shard_grad();
  reduced_ = false;
}

void Zero1::reduce_gradients() {
  if (reduced_) return;
  torch::NoGradGuard no_grad;
  comm::Communicator& comm = sharded_.comm();
  const ShardLayout& layout = sharded_.layout();
  const ZeroOptions& options = sharded_.options();
  for (int b = 0; b < layout.buckets(); ++b) {
    // (bucket numel,) local gradients / p: summed over ranks, the average.
    at::Tensor flat = flat_gradients(layout, b, sharded_.params(), 1.0 / comm.size());
    trace::Span span(comm.recorder(), comm.world_rank(), kLaneZero, "reduce-scatter", "zero_reduce_scatter");
    if (span.active()) {
      comm.label(span);
      span.set_name("reduce-scatter bucket " + std::to_string(b))
          .set_bytes(static_cast<int64_t>(flat.nbytes()))
          .arg("stage", sharded_.who())
          .arg("bucket", b)
          .arg("params", layout.plan.buckets[static_cast<size_t>(b)].params.size())
          .arg("step", sharded_.steps())
          .arg("algorithm", collectives::to_string(options.algorithm));
    }
    const at::Tensor mine = collectives::reduce_scatter(comm, flat, comm::ReduceOp::kSum, options.algorithm, options.tag);
    sharded_.shard_grad().narrow(0, layout.shard_offset(b, comm.rank()), mine.numel()).copy_(mine);
  }
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
