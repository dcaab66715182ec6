#include "ddp/reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <mutex>

#include "collectives/async.hpp"
#include "collectives/collectives.hpp"
#include "ddp/bucket_view.hpp"

namespace distlab::ddp {

const char* to_string(Compression compression) {
  switch (compression) {
    case Compression::kFp16: return "fp16";
    case Compression::kBf16: return "bf16";
    default: return "none";
  }
}

namespace {
constexpr const char* kLaneDdp = "ddp";
}

struct ReducerState : std::enable_shared_from_this<ReducerState> {
  ReducerState(comm::Communicator& c, ReducerOptions o) : comm(c), options(o), comm_thread(c) {}

  comm::Communicator& comm;
  ReducerOptions options;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  collectives::CommThread comm_thread;

  std::mutex mutex;
  BucketPlan plan;
  std::vector<int> bucket_of;
  std::vector<int64_t> offset_of;
  std::vector<at::Tensor> buffers;       // one flat buffer per bucket
  std::vector<int> pending;              // gradients each bucket still waits for
  std::vector<comm::WorkPtr> works;      // launched all-reduces
  std::vector<bool> ready;               // per parameter, this backward
  int next_launch = 0;                   // buckets launch strictly in order
  bool expect_sync = true;
  bool reducing = false;                 // a synchronized backward is under way
  std::vector<int> ready_order;          // first synchronized step only
  bool rebuild_due = false;
  bool rebuilt = false;
  ReducerStats stats;

  // The dtype a gradient travels in.
  at::ScalarType wire_type(at::ScalarType type) const {
    if (!at::isFloatingType(type)) return type;
    if (options.compression == Compression::kFp16) return at::kHalf;
    if (options.compression == Compression::kBf16) return at::kBFloat16;
    return type;
  }

  std::vector<ParamInfo> infos() const {
    std::vector<ParamInfo> out;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& p = params[i];
      const at::ScalarType type = wire_type(p.scalar_type());
      out.push_back({names[i], p.numel(), static_cast<int64_t>(c10::elementSize(type)), c10::toString(type),
                     p.device().str()});
    }
    return out;
  }

  // Lays out buckets and their buffers for `order`; records the plan.
  void set_plan(const std::vector<int>& order, bool is_rebuild) {
    plan = plan_buckets(infos(), order, options.first_bucket_bytes, options.bucket_cap_bytes);
    bucket_of = plan.bucket_of();
    offset_of = plan.offset_of();
    buffers.clear();
    for (const Bucket& b : plan.buckets) {
      const at::Tensor& first = params[static_cast<size_t>(b.params.front())];
      buffers.push_back(
          at::zeros({b.numel}, at::TensorOptions().dtype(wire_type(first.scalar_type())).device(first.device())));
    }
    reset_step();
    trace::Span span(comm.recorder(), comm.world_rank(), kLaneDdp, is_rebuild ? "bucket plan (rebuilt)" : "bucket plan",
                     "bucket_plan");
    if (span.active()) {
      comm.label(span);
      span.arg("buckets", plan.buckets.size()).arg("rebuilt", is_rebuild ? 1 : 0).arg("plan", plan.json());
    }
  }

  // Parameter i's slot in its bucket.
  at::Tensor slot_of(size_t i) {
    return buffers[static_cast<size_t>(bucket_of[i])].narrow(0, offset_of[i], params[i].numel());
  }

  // Puts grad / world_size into `slot` in one pass, as PyTorch's reducer
  // does (a multiply by the wrapped scalar 1/world_size, so its rounding is
  // PyTorch's too). Divided before the sum: a half-precision sum of
  // world_size undivided gradients could overflow. When .grad already is
  // the slot (gradient_as_bucket_view), it is scaled in place.
  void scale_into(at::Tensor& slot, const at::Tensor& grad) {
    const at::Tensor flat = grad.reshape({-1});
    const bool in_place = flat.data_ptr() == slot.data_ptr() && flat.scalar_type() == slot.scalar_type();
    if (comm.size() == 1) {
      if (!in_place) slot.copy_(flat);
      return;
    }
    const at::Tensor factor = at::native::wrapped_scalar_tensor(1.0 / comm.size());
    if (in_place)
      slot.mul_(factor);
    else
      at::mul_out(slot, flat, factor);
  }

  // The averaged gradient of parameter i, back in .grad: a copy, or with
  // gradient_as_bucket_view the slot itself (when it has the parameter's dtype).
  void hand_back(size_t i) {
    at::Tensor& p = params[i];
    const at::Tensor slot = slot_of(i);
    if (options.gradient_as_bucket_view && slot.scalar_type() == p.scalar_type()) {
      if (p.grad().defined() && p.grad().data_ptr() == slot.data_ptr()) return;  // already the slot
      p.mutable_grad() = bucket_view(slot, p.sizes());
      return;
    }
    const at::Tensor averaged = slot.view(p.sizes());
    if (p.grad().defined())
      p.mutable_grad().copy_(averaged);
    else
      p.mutable_grad() = averaged.to(p.scalar_type()).clone();
  }

  void reset_step() {
    pending.clear();
    for (const Bucket& b : plan.buckets) pending.push_back(static_cast<int>(b.params.size()));
    works.assign(plan.buckets.size(), nullptr);
    ready.assign(params.size(), false);
    next_launch = 0;
    reducing = false;
  }

  void launch_ready_locked() {
    while (next_launch < static_cast<int>(plan.buckets.size()) && pending[static_cast<size_t>(next_launch)] == 0) {
      const int b = next_launch++;
      at::Tensor buffer = buffers[static_cast<size_t>(b)];
      ++stats.all_reduces;
      stats.bytes += static_cast<int64_t>(buffer.nbytes());
      const auto algorithm = options.algorithm;
      const int tag = options.tag;
      const int64_t step = stats.synced_steps;
      const size_t count = plan.buckets[static_cast<size_t>(b)].params.size();
      comm::Communicator& c = comm;
      works[static_cast<size_t>(b)] = comm_thread.submit(
          c.self() + ": all-reduce of DDP bucket " + std::to_string(b),
          [&c, buffer, algorithm, tag, b, step, count]() mutable {
            trace::Span span(c.recorder(), c.world_rank(), kLaneDdp, "bucket", "bucket");
            if (span.active()) {
              c.label(span);
              span.set_name("all-reduce bucket " + std::to_string(b))
                  .set_bytes(static_cast<int64_t>(buffer.nbytes()))
                  .arg("bucket", b)
                  .arg("params", count)
                  .arg("step", step)
                  .arg("algorithm", collectives::to_string(algorithm));
            }
            collectives::all_reduce(c, buffer, comm::ReduceOp::kSum, algorithm, tag);
          });
    }
  }

  // The post hook of parameter i's gradient accumulator.
  void on_grad_ready(int i) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!expect_sync) return;  // no_sync: the gradient stays in .grad, summed with the next ones
    if (!reducing) {
      reducing = true;
      // Runs when the whole backward is done, on the thread that called it.
      std::weak_ptr<ReducerState> weak = shared_from_this();
      torch::autograd::Engine::get_default_engine().queue_callback([weak] {
        if (auto self = weak.lock()) self->finalize();
      });
    }
    if (ready[static_cast<size_t>(i)]) return;  // a second call (e.g. reentrant backward): already in its bucket
    ready[static_cast<size_t>(i)] = true;
    if (!rebuilt) ready_order.push_back(i);
    const int b = bucket_of[static_cast<size_t>(i)];
    at::Tensor slot = slot_of(static_cast<size_t>(i));
    const at::Tensor& grad = params[static_cast<size_t>(i)].grad();
    if (grad.defined())
      scale_into(slot, grad);
    else
      slot.zero_();
    trace::Span span(comm.recorder(), comm.world_rank(), kLaneDdp, "grad ready", "grad_ready");
    if (span.active()) {
      comm.label(span);
      span.set_name("grad " + names[static_cast<size_t>(i)]).arg("param", i).arg("bucket", b).arg("step", stats.synced_steps);
    }
    if (--pending[static_cast<size_t>(b)] == 0) launch_ready_locked();
  }

  void finalize();
};

void ReducerState::finalize() {
  std::unique_lock<std::mutex> lock(mutex);
  if (!reducing) return;
  trace::Span span(comm.recorder(), comm.world_rank(), kLaneDdp, "wait for buckets", "ddp_wait");
  if (span.active()) {
    comm.label(span);
    span.arg("step", stats.synced_steps);
  }
  // Parameters whose hook did not fire in this backward are reduced all the
  // same, so that the other ranks' all-reduces complete: with what .grad
  // holds (earlier no_sync steps may have accumulated a gradient there:
  // pytorch#69031 lost exactly that), or zero. An error unless expected.
  std::string unused;
  for (size_t i = 0; i < params.size(); ++i) {
    if (ready[i]) continue;
    ready[i] = true;
    const int b = bucket_of[i];
    at::Tensor slot = slot_of(i);
    const at::Tensor& grad = params[i].grad();
    if (grad.defined() && options.find_unused_parameters)
      scale_into(slot, grad);
    else
      slot.zero_();
    if (!options.find_unused_parameters) unused += (unused.empty() ? "'" : ", '") + names[i] + "'";
    --pending[static_cast<size_t>(b)];
  }
  launch_ready_locked();
  std::vector<comm::WorkPtr> launched = works;
  lock.unlock();
  for (size_t b = 0; b < launched.size(); ++b) {
    try {
      launched[b]->wait();
    } catch (const comm::TimeoutError& e) {
      throw comm::TimeoutError("DDP bucket " + std::to_string(b) + " of " + std::to_string(launched.size()) +
                               " (" + std::to_string(plan.buckets[b].params.size()) + " parameters): " + e.what());
    } catch (const comm::CommError& e) {
      throw comm::CommError("DDP bucket " + std::to_string(b) + " of " + std::to_string(launched.size()) + ": " +
                            e.what());
    }
  }
  lock.lock();
  for (size_t i = 0; i < params.size(); ++i) hand_back(i);
  ++stats.synced_steps;
  reset_step();
  if (!rebuilt && options.rebuild_buckets && !options.find_unused_parameters &&
      static_cast<int>(ready_order.size()) == static_cast<int>(params.size()))
    rebuild_due = true;
  // Without a rebuild to come (rebuild_buckets off, find_unused_parameters,
  // or a step that missed some gradients) the order is of no use: dropped,
  // or it would grow by one entry per parameter every step.
  if (!rebuild_due) ready_order.clear();
  if (!unused.empty())
    throw comm::CommError(
        comm.self() + ": DistributedDataParallel: parameter(s) " + unused +
        " got no gradient in this backward. If some parameters are not used in every step, construct DDP with "
        "find_unused_parameters = true (they are then reduced as zero); otherwise make every parameter "
        "contribute to the loss, or exclude it from the module (requires_grad false).");
}


Reducer::Reducer(comm::Communicator& comm, std::vector<at::Tensor> params, std::vector<std::string> names,
                 ReducerOptions options)
    : state_(std::make_shared<ReducerState>(comm, options)) {
  state_->params = std::move(params);
  state_->names = std::move(names);
  std::weak_ptr<ReducerState> weak = state_;
  hooks_ = std::make_unique<GradReadyHooks>(state_->params, [weak](size_t i) {
    if (auto state = weak.lock()) state->on_grad_ready(static_cast<int>(i));
  });
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->set_plan(reverse_registration_order(static_cast<int>(state_->params.size())), /*is_rebuild=*/false);
}

Reducer::~Reducer() = default;

void Reducer::prepare_for_backward(bool sync) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->reducing)
    throw comm::CommError(state_->comm.self() +
                          ": DistributedDataParallel: the previous backward started reducing gradients but never "
                          "finished (was backward interrupted, or run with autograd::grad?); call finalize() or run "
                          "a full backward before the next forward");
  if (state_->rebuild_due) {
    // Every rank must pack alike: rank 0's order of readiness is the law.
    std::vector<int64_t> mine(state_->ready_order.begin(), state_->ready_order.end());
    at::Tensor order = at::tensor(mine, at::kLong).to(state_->comm.device());
    state_->comm.native_broadcast(order, 0);
    order = order.cpu();
    std::vector<int> agreed(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    state_->rebuild_due = false;
    state_->rebuilt = true;
    state_->set_plan(agreed, /*is_rebuild=*/true);
  }
  state_->expect_sync = sync;
  if (!sync) ++state_->stats.local_steps;
}

void Reducer::finalize() { state_->finalize(); }

const BucketPlan& Reducer::plan() const { return state_->plan; }

std::vector<at::Tensor> Reducer::bucket_buffers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->buffers;
}

ReducerStats Reducer::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace distlab::ddp
