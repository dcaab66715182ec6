#include "zero/sharded_optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "collectives/collectives.hpp"
#include "collectives/grad_norm.hpp"
#include "comm/errors.hpp"
#include "ddp/bucket_view.hpp"
#include "ddp/replicas.hpp"
#include "flight/site.hpp"

namespace distlab::zero {
namespace {

std::string describe(const at::Tensor& t) {
  return std::string(c10::toString(t.scalar_type())) + " on " + t.device().str();
}

// An algorithm that has a reduce-scatter and an all-gather (checked before
// any message: a bad option fails alike on every rank).
void check_algorithm(const ZeroOptions& options, const std::string& who) {
  const auto valid = collectives::algorithms_for(collectives::Collective::kReduceScatter);
  if (options.algorithm != collectives::Algorithm::kNative &&
      std::find(valid.begin(), valid.end(), options.algorithm) == valid.end())
    throw std::invalid_argument(who + ": algorithm '" + collectives::to_string(options.algorithm) +
                                "' has no reduce-scatter and all-gather; use 'ring' or 'native'");
}

// What one flat buffer per bucket and one shard tensor need: a single dtype
// and device.
void check_one_dtype(const comm::Communicator& comm, const ddp::NamedTensors& named, const std::string& who) {
  for (const auto& [name, p] : named) {
    const auto& [first_name, first] = named.front();
    if (p.scalar_type() != first.scalar_type() || p.device() != first.device())
      throw comm::CommError(comm.self() + ": " + who + ": parameter '" + name + "' is " + describe(p) + ", but '" +
                            first_name + "' is " + describe(first) +
                            ". ZeRO flattens all parameters into buffers of one dtype on one device: convert the "
                            "model first (model->to(...)).");
  }
}

// The flat buffer of bucket `bucket` back into its parameters, in place.
void copy_into_parameters(const ShardLayout& layout, int bucket, const at::Tensor& flat,
                          const std::vector<at::Tensor>& params) {
  int64_t offset = 0;
  for (int i : layout.plan.buckets[static_cast<size_t>(bucket)].params) {
    const at::Tensor& p = params[static_cast<size_t>(i)];
    p.copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

std::vector<ddp::ParamInfo> infos_of(const ddp::NamedTensors& named) {
  std::vector<ddp::ParamInfo> infos;
  for (const auto& [name, p] : named)
    infos.push_back({name, p.numel(), static_cast<int64_t>(p.element_size()), c10::toString(p.scalar_type()),
                     p.device().str()});
  return infos;
}

}  // namespace

Packing pack_by_size(const ZeroOptions& options, BucketOrder order) {
  return [options, order](const std::vector<ddp::ParamInfo>& infos) {
    return plan_by_size(infos, order, options.first_bucket_bytes, options.bucket_cap_bytes);
  };
}

at::Tensor flat_gradients(const ShardLayout& layout, int bucket, const std::vector<at::Tensor>& params, double scale) {
  std::vector<at::Tensor> pieces;
  for (int i : layout.plan.buckets[static_cast<size_t>(bucket)].params) {
    const at::Tensor& p = params[static_cast<size_t>(i)];
    pieces.push_back(p.grad().defined() ? p.grad().reshape({-1}) : at::zeros({p.numel()}, p.options()));
  }
  at::Tensor flat = at::cat(pieces);
  if (scale != 1.0) flat.mul_(scale);
  return flat;
}

at::Tensor flat_parameters(const ShardLayout& layout, int bucket, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> pieces;
  for (int i : layout.plan.buckets[static_cast<size_t>(bucket)].params)
    pieces.push_back(params[static_cast<size_t>(i)].detach().reshape({-1}));
  return at::cat(pieces);
}

ShardedOptimizer::ShardedOptimizer(comm::Communicator& comm, torch::nn::Module& module,
                                   const OptimizerFactory& make_optimizer, ZeroOptions options, Stage stage,
                                   const Packing& packing, ShardStorage storage)
    : comm_(comm),
      options_(options),
      stage_(stage),
      who_(to_string(stage)),
      state_bytes_per_parameter_(make_optimizer.state_bytes_per_parameter) {
  check_algorithm(options_, who_);
  const ddp::NamedTensors named = ddp::trainable_parameters(module);
  // The plan is local (every rank packs its own list), so a rank whose
  // parameters differ is told which bucket or unit the difference is in.
  ddp::BucketPlan plan = packing(infos_of(named));
  const std::vector<int> bucket_of = plan.bucket_of();
  const std::string piece = stage == Stage::kZero3 ? "unit " : "bucket ";
  ddp::verify_same_parameters(comm_, named, who_, [&](size_t i) {
    return "in " + who_ + " " + piece + std::to_string(bucket_of[i]) + " of " + std::to_string(plan.buckets.size());
  });
  check_one_dtype(comm_, named, who_);
  for (const auto& [name, p] : named) names_.push_back(name);
  params_ = ddp::tensors_of(named);
  ddp::broadcast_from_rank0(comm_, params_);
  std::vector<at::Tensor> buffers;
  for (const auto& item : module.named_buffers(/*recurse=*/true)) buffers.push_back(item.value());
  ddp::broadcast_from_rank0(comm_, buffers);
  layout_ = make_shard_layout(std::move(plan), comm_.size());

  const int rank = comm_.rank();
  options_of_ = params_.empty() ? at::TensorOptions().dtype(at::kFloat).device(comm_.device())
                                : params_.front().options();
  {
    torch::NoGradGuard no_grad;
    const std::vector<int64_t> offset_of = layout_.plan.offset_of();
    for (int b = 0; b < layout_.buckets(); ++b) {
      const collectives::Range mine = layout_.chunk(b, rank);
      at::Tensor flat = flat_parameters(layout_, b, params_).clone();  // (bucket numel,)
      if (storage == ShardStorage::kViewsOfParameters) {
        for (int i : layout_.plan.buckets[static_cast<size_t>(b)].params) {
          const at::Tensor& p = params_[static_cast<size_t>(i)];
          p.set_data(flat.narrow(0, offset_of[static_cast<size_t>(i)], p.numel()).view(p.sizes()));
        }
        flats_.push_back(flat);
        chunks_.push_back(flat.narrow(0, mine.offset, mine.count));
      } else {
        chunks_.push_back(flat.narrow(0, mine.offset, mine.count).clone());
      }
    }
  }
  for (at::Tensor& chunk : chunks_) {
    chunk.requires_grad_(true);
    chunk.mutable_grad() = at::zeros_like(chunk);
  }
  optimizer_ = make_optimizer(chunks_);

  trace::Span span(comm_.recorder(), comm_.world_rank(), kLaneZero, "shard layout", "zero_layout");
  if (span.active()) {
    comm_.label(span);
    span.arg("stage", who_).arg("shard", layout_.shard_numel(rank)).arg("layout", layout_.json());
  }
}

MemoryUse ShardedOptimizer::memory() const {
  std::vector<at::Tensor> tensors = params_;
  tensors.insert(tensors.end(), chunks_.begin(), chunks_.end());
  MemoryUse m = measure_memory(tensors, optimizer_.get());
  m.buffers = peaks_.buffers();
  m.activations = peaks_.activations();
  return m;
}

MemoryUse ShardedOptimizer::accounting() const {
  const int64_t element = static_cast<int64_t>(options_of_.dtype().itemsize());
  return zero::accounting(stage_, layout_.numel(), comm_.size(), element,
                          state_bytes_per_parameter_ * element / 4);
}

void ShardedOptimizer::record_memory() const {
  trace::Recorder* recorder = comm_.recorder();
  if (recorder != nullptr && recorder->enabled())
    zero::record_memory(recorder, comm_.world_rank(), who_, memory(), accounting());
}

at::Tensor ShardedOptimizer::shard_grad() const {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& chunk : chunks_) grads.push_back(chunk.grad());
  return grads.empty() ? at::empty({0}, options_of_) : at::cat(grads);
}

void ShardedOptimizer::zero_shard_grad() {
  for (const at::Tensor& chunk : chunks_) chunk.grad().zero_();
}

double ShardedOptimizer::clip_grad_norm(double max_norm) {
  collectives::NormShare shard{{}, {&comm_}};  // the shards' squares summed over the group
  for (const at::Tensor& chunk : chunks_) shard.gradients.push_back(chunk.grad());
  return collectives::clip_grad_norm({shard}, max_norm);
}

void ShardedOptimizer::step() {
  step_shard();
  gather_parameters();
}

void ShardedOptimizer::step_shard() {
  trace::Span span(comm_.recorder(), comm_.world_rank(), kLaneZero, "shard step", "zero_step");
  if (span.active()) {
    comm_.label(span);
    span.arg("stage", who_).arg("step", steps_).arg("shard", layout_.shard_numel(comm_.rank()));
  }
  record_memory();  // the gradients are all here, the state as the last step left it
  optimizer_->step();
  ++steps_;
  record_memory();
}

void ShardedOptimizer::label_bucket_span(trace::Span& span, int bucket, const std::string& name,
                                         const at::Tensor& flat, const SubmittedWhen& submitted) const {
  if (!span.active()) return;
  comm_.label(span);
  span.set_name(name)
      .set_bytes(static_cast<int64_t>(flat.nbytes()))
      .arg("stage", who_)
      .arg("bucket", bucket)
      .arg("params", layout_.plan.buckets[static_cast<size_t>(bucket)].params.size())
      .arg("step", steps_)
      .arg("algorithm", collectives::to_string(options_.algorithm));
  for (const auto& [key, count] : submitted) span.arg(key.c_str(), count);
}

void ShardedOptimizer::wait_naming(const comm::WorkPtr& work, const std::string& which) {
  try {
    work->wait();
  } catch (const comm::CommError& e) {
    comm::rethrow_with_context(which + ": ", e);
  }
}

void ShardedOptimizer::all_gather_bucket(int bucket, const at::Tensor& flat, const std::string& name,
                                         const SubmittedWhen& submitted) const {
  torch::NoGradGuard no_grad;
  const int rank = comm_.rank();
  const collectives::Range mine = layout_.chunk(bucket, rank);
  const at::Tensor& chunk = chunks_[static_cast<size_t>(bucket)];
  at::Tensor place = flat.narrow(0, mine.offset, mine.count);
  if (place.data_ptr() != chunk.data_ptr()) place.copy_(chunk);  // a view of `flat` is in place already
  trace::Span span(comm_.recorder(), comm_.world_rank(), kLaneZero, "all-gather", "zero_all_gather");
  label_bucket_span(span, bucket, name, flat, submitted);
  at::Tensor target = flat;
  flight::Site site("ZeRO " + name);  // the flight recorder's call site: which bucket or unit
  collectives::all_gather(comm_, target, options_.algorithm, options_.tag);
}

void ShardedOptimizer::reduce_scatter_bucket(int bucket, at::Tensor flat, const std::string& name,
                                             const SubmittedWhen& submitted) {
  torch::NoGradGuard no_grad;
  const collectives::Range mine = layout_.chunk(bucket, comm_.rank());
  at::Tensor target = chunks_[static_cast<size_t>(bucket)].mutable_grad();
  TORCH_CHECK(target.numel() == mine.count, "ZeRO: bucket ", bucket, "'s chunk has ", target.numel(), " elements, not ",
              mine.count);
  trace::Span span(comm_.recorder(), comm_.world_rank(), kLaneZero, "reduce-scatter", "zero_reduce_scatter");
  label_bucket_span(span, bucket, name, flat, submitted);
  flight::Site site("ZeRO " + name);
  target.add_(collectives::reduce_scatter(comm_, flat, comm::ReduceOp::kSum, options_.algorithm, options_.tag));
}

void ShardedOptimizer::use_gradient_buffers() {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> offset_of = layout_.plan.offset_of();
  grad_slots_.assign(params_.size(), at::Tensor());
  for (int b = 0; b < layout_.buckets(); ++b) {
    const ddp::Bucket& bucket = layout_.plan.buckets[static_cast<size_t>(b)];
    at::Tensor buffer = at::zeros({bucket.numel}, options_of_);  // (bucket numel,)
    for (int i : bucket.params) {
      grad_slots_[static_cast<size_t>(i)] =
          buffer.narrow(0, offset_of[static_cast<size_t>(i)], params_[static_cast<size_t>(i)].numel());
      point_grad_at_slot(static_cast<size_t>(i));
    }
    const collectives::Range mine = layout_.chunk(b, comm_.rank());
    const at::Tensor my_range = buffer.narrow(0, mine.offset, mine.count);
    chunks_[static_cast<size_t>(b)].mutable_grad() = ddp::bucket_view(my_range, my_range.sizes());
    grad_buffers_.push_back(buffer);
  }
}

void ShardedOptimizer::point_grad_at_slot(size_t i) {
  const at::Tensor& p = params_[i];
  p.mutable_grad() = ddp::bucket_view(grad_slots_[i], p.sizes());
}

void ShardedOptimizer::zero_gradient_buffers() {
  for (const at::Tensor& buffer : grad_buffers_) buffer.zero_();
  for (size_t i = 0; i < grad_slots_.size(); ++i) {
    const at::Tensor& grad = params_[i].grad();
    if (!grad.defined() || grad.data_ptr() != grad_slots_[i].data_ptr()) point_grad_at_slot(i);
  }
}

void ShardedOptimizer::reduce_scatter_gradient_buffer(int bucket, const std::string& name) {
  torch::NoGradGuard no_grad;
  at::Tensor buffer = grad_buffers_.at(static_cast<size_t>(bucket));
  for (int i : layout_.plan.buckets[static_cast<size_t>(bucket)].params) {
    const at::Tensor& slot = grad_slots_[static_cast<size_t>(i)];
    const at::Tensor& grad = params_[static_cast<size_t>(i)].grad();
    if (grad.defined() && grad.data_ptr() == slot.data_ptr()) continue;  // backward accumulated into the slot
    if (grad.defined())
      slot.copy_(grad.reshape({-1}));
    else
      slot.zero_();
    point_grad_at_slot(static_cast<size_t>(i));
  }
  if (comm_.size() > 1) buffer.mul_(1.0 / comm_.size());  // summed over the ranks: the average
  trace::Span span(comm_.recorder(), comm_.world_rank(), kLaneZero, "reduce-scatter", "zero_reduce_scatter");
  label_bucket_span(span, bucket, name, buffer);
  // My chunk of the buffer, which the shard's .grad already is, holds the sum.
  flight::Site site("ZeRO " + name);
  collectives::reduce_scatter(comm_, buffer, comm::ReduceOp::kSum, options_.algorithm, options_.tag);
}

void ShardedOptimizer::gather_parameters() {
  torch::NoGradGuard no_grad;
  for (int b = 0; b < layout_.buckets(); ++b) {
    // (bucket numel,): my chunk filled in, the others' filled by the all-gather.
    if (!flats_.empty()) {  // the parameters are views into it
      all_gather_bucket(b, flats_[static_cast<size_t>(b)], "all-gather bucket " + std::to_string(b));
      continue;
    }
    at::Tensor flat = at::empty({layout_.plan.buckets[static_cast<size_t>(b)].numel}, options_of_);
    all_gather_bucket(b, flat, "all-gather bucket " + std::to_string(b));
    copy_into_parameters(layout_, b, flat, params_);
  }
}

void ShardedOptimizer::refuse_unreduced_grads() const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined())
      throw comm::CommError(comm_.self() + ": " + who_ + ": parameter '" + names_[i] +
                            "' still holds a gradient that was never reduce-scattered (a backward under no_sync "
                            "with no synchronized backward after it): run the last micro-step outside no_sync()");
}

}  // namespace distlab::zero
