#include "ddp/reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <array>
#include <mutex>

#include "collectives/async.hpp"
#include "collectives/collectives.hpp"
#include "comm/backward_thread.hpp"
#include "comm/errors.hpp"
#include "flight/site.hpp"
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

// Three state machines: a bucket's, the reducer's step, the plan's rebuild.
// A transition asserts the state it starts from (if not, the bug is here).
enum class BucketState { kFilling, kReady, kLaunched, kReduced };
enum class Phase { kLocal, kArmed, kReducing };
enum class Rebuild { kRecording, kDue, kDone };
const char* name(BucketState s) { return std::array{"filling", "ready", "launched", "reduced"}[size_t(s)]; }
const char* name(Phase p) { return std::array{"local", "armed", "reducing"}[size_t(p)]; }
const char* name(Rebuild r) { return std::array{"recording", "due", "done"}[size_t(r)]; }

template <typename State, typename... Who>
void transition(State& state, State from, State to, const Who&... who) {
  TORCH_INTERNAL_ASSERT(state == from, who..., " must be ", name(from), " to become ", name(to), ", not ", name(state));
  state = to;
}

// One bucket of the plan through a synchronized backward, as picotron's
// Bucket: which of its gradients are in, and the handle of its all-reduce.
// Its gradients go into a buffer of its own (slots, one per parameter),
// which is all-reduced and copied back to .grad; or, where the backend can
// (Communicator::all_reduces_parts_in_place), stay in .grad, where they
// are all-reduced as they lie: no buffer, no copies in or out.
//   filling  --its last gradient is in its slot-->  ready
//   ready    --every earlier bucket launched-->      launched (all-reduce on the comm thread)
//   launched --finalize() waited for it-->           reduced
//   reduced  --the gradients are back in .grad-->    filling
class GradBucket {
 public:
  // Bucket `index` of a plan: a zeroed buffer, a slot (a flat view of it) per parameter.
  GradBucket(size_t index, const Bucket& planned, const std::vector<at::Tensor>& params, at::TensorOptions options,
             bool in_place)
      : index_(index), params_(planned.params), bytes_(planned.bytes), in_place_(in_place),
        has_grad_(planned.params.size()), pending_(planned.params.size()) {
    if (in_place) return;
    buffer_ = at::zeros({planned.numel}, options);
    int64_t offset = 0;
    for (int i : planned.params) {
      slots_.push_back(buffer_.narrow(0, offset, params[static_cast<size_t>(i)].numel()));
      offset += slots_.back().numel();
    }
  }
  size_t index() const { return index_; }
  BucketState state() const { return state_; }
  const at::Tensor& buffer() const { return buffer_; }  // undefined when in place
  int64_t bytes() const { return bytes_; }
  bool in_place() const { return in_place_; }
  at::Tensor& slot(size_t k) { return slots_[k]; }
  bool has_grad(size_t k) const { return has_grad_[k]; }

  // Its k-th gradient is in its slot; the last one makes the bucket ready.
  void add_grad(size_t k) {
    TORCH_INTERNAL_ASSERT(state_ == BucketState::kFilling && !has_grad_[k], "DDP bucket ", index_, " got gradient ", k,
                          " twice or while ", name(state_));
    has_grad_[k] = true;
    if (--pending_ == 0) transition(state_, BucketState::kFilling, BucketState::kReady, "DDP bucket ", index_);
  }

  // Its all-reduce on the comm thread; `params` are the reducer's.
  void launch(collectives::CommThread& thread, collectives::Algorithm algorithm, int tag, int64_t step,
              const std::vector<at::Tensor>& params) {
    transition(state_, BucketState::kReady, BucketState::kLaunched, "DDP bucket ", index_);
    comm::Communicator& c = thread.comm();
    std::vector<at::Tensor> grads;  // in place: the parts, in packing order
    if (in_place_)
      for (int i : params_) grads.push_back(params[static_cast<size_t>(i)].grad());
    // The flight recorder's call site of this all-reduce (the comm thread takes it along).
    flight::Site site("DDP bucket " + std::to_string(index_) + ", step " + std::to_string(step));
    work_ = thread.submit(c.self() + ": all-reduce of DDP bucket " + std::to_string(index_),
                          [&c, buffer = buffer_, grads = std::move(grads), b = index_, bytes = bytes_,
                           count = params_.size(), algorithm, tag, step]() mutable {
      trace::Span span(c.recorder(), c.world_rank(), kLaneDdp, "bucket", "bucket");
      if (span.active()) {
        c.label(span);
        span.set_name("all-reduce bucket " + std::to_string(b)).set_bytes(bytes);
        span.arg("bucket", b).arg("params", count).arg("step", step);
        span.arg("algorithm", collectives::to_string(algorithm)).arg("in_place", grads.empty() ? 0 : 1);
      }
      if (grads.empty())
        collectives::all_reduce(c, buffer, comm::ReduceOp::kSum, algorithm, tag);
      else
        c.native_all_reduce_parts(grads, 1.0 / c.size());
    });
  }

  const comm::WorkPtr& work() const {
    TORCH_INTERNAL_ASSERT(state_ == BucketState::kLaunched, "DDP bucket ", index_, " has no work: ", name(state_));
    return work_;
  }
  void reduced() { transition(state_, BucketState::kLaunched, BucketState::kReduced, "DDP bucket ", index_); }
  void reset() {
    transition(state_, BucketState::kReduced, BucketState::kFilling, "DDP bucket ", index_);
    has_grad_.assign(has_grad_.size(), false);
    pending_ = params_.size();
    work_ = nullptr;
  }

 private:
  size_t index_;
  std::vector<int> params_;        // the reducer's indices, in packing order
  int64_t bytes_;
  bool in_place_;
  at::Tensor buffer_;
  std::vector<at::Tensor> slots_;  // in packing order (none in place)
  std::vector<bool> has_grad_;     // per slot, in this backward
  size_t pending_;                 // gradients it still waits for
  comm::WorkPtr work_;
  BucketState state_ = BucketState::kFilling;
};

// The plan's one rebuild, in the order gradients became ready: recording in
// each synchronized backward until one saw all n gradients, then due at the
// next prepare_for_backward, then done (from the start if not wanted).
struct PlanRebuild {
  Rebuild stage;
  std::vector<int> order;  // this rank's; rank 0's is the law

  void record(size_t param) {
    if (stage == Rebuild::kRecording) order.push_back(static_cast<int>(param));
  }
  void step_done(size_t n) {  // a step that missed a gradient is of no use: the next records afresh
    if (stage != Rebuild::kRecording) return;
    if (order.size() == n) transition(stage, Rebuild::kRecording, Rebuild::kDue, "DDP's plan rebuild");
    else order.clear();
  }
};
}  // namespace

// The reducer's step:
//   local     (no_sync) the hooks leave the gradients in .grad
//   armed     the coming backward synchronizes; its first hook queues
//             finalize() with the autograd engine and moves to
//   reducing  gradients go into their buckets, which launch; finalize()
//             waits, hands the gradients back to .grad: armed again.
// prepare_for_backward picks local or armed; while reducing it throws.
struct ReducerState : std::enable_shared_from_this<ReducerState> {
  ReducerState(comm::Communicator& c, std::vector<at::Tensor> p, std::vector<std::string> n, ReducerOptions o)
      : comm(c), options(o), params(std::move(p)), names(std::move(n)), comm_thread(c),
        rebuild{o.rebuild_buckets && !o.find_unused_parameters ? Rebuild::kRecording : Rebuild::kDone, {}} {
    set_plan(reverse_registration_order(static_cast<int>(params.size())), /*is_rebuild=*/false);
  }

  comm::Communicator& comm;
  ReducerOptions options;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  collectives::CommThread comm_thread;

  std::mutex mutex;  // the hooks fire on autograd threads
  BucketPlan plan;
  std::vector<GradBucket> buckets;                // launched strictly in this order
  std::vector<std::pair<size_t, size_t>> place;  // parameter i: its bucket, its slot there
  Phase phase = Phase::kArmed;
  comm::BackwardCaller caller;  // the thread of the forward, which calls backward
  PlanRebuild rebuild;
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
    buckets.clear();
    place.resize(params.size());
    for (const Bucket& planned : plan.buckets) {
      const at::Tensor& first = params[static_cast<size_t>(planned.params.front())];
      buckets.emplace_back(buckets.size(), planned, params, first.options().dtype(wire_type(first.scalar_type())),
                           in_place(planned));
      for (size_t k = 0; k < planned.params.size(); ++k)
        place[static_cast<size_t>(planned.params[k])] = {buckets.size() - 1, k};
    }
    trace::Span span(comm.recorder(), comm.world_rank(), kLaneDdp, is_rebuild ? "bucket plan (rebuilt)" : "bucket plan",
                     "bucket_plan");
    if (span.active()) {
      comm.label(span);
      span.arg("buckets", plan.buckets.size()).arg("rebuilt", is_rebuild ? 1 : 0).arg("plan", plan.json());
    }
  }

  // Whether a bucket is all-reduced where its gradients lie: where the
  // backend can, and they travel as they are (no compression, DistLab's
  // own algorithms need one tensor, bucket views are the buffer already).
  bool in_place(const Bucket& planned) const {
    if (!options.in_place || options.gradient_as_bucket_view || options.compression != Compression::kNone ||
        options.algorithm != collectives::Algorithm::kNative)
      return false;
    const at::ScalarType type = params[static_cast<size_t>(planned.params.front())].scalar_type();
    for (int i : planned.params)
      if (params[static_cast<size_t>(i)].scalar_type() != type) return false;
    return comm.all_reduces_parts_in_place(planned.bytes);
  }

  // Due -> done. Every rank must pack alike: rank 0's order of readiness is the law.
  void rebuild_plan_locked() {
    at::Tensor order = at::tensor(std::vector<int64_t>(rebuild.order.begin(), rebuild.order.end()), at::kLong);
    order = order.to(comm.device());
    comm.native_broadcast(order, 0);
    order = order.cpu();
    transition(rebuild.stage, Rebuild::kDue, Rebuild::kDone, "DDP's plan rebuild");
    set_plan(std::vector<int>(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel()), true);
  }

  GradBucket& bucket_of(size_t i) { return buckets[place[i].first]; }
  at::Tensor& slot_of(size_t i) { return bucket_of(i).slot(place[i].second); }
  bool has_grad(size_t i) { return bucket_of(i).has_grad(place[i].second); }

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

  // Parameter i's gradient into its slot (zero if it has none, or if `zero`);
  // in place, .grad made ready to be all-reduced as it lies: contiguous, the
  // parameter's dtype, zero if it has none or if `zero`.
  GradBucket& add_grad_locked(size_t i, bool zero) {
    const at::Tensor& grad = params[i].grad();
    if (bucket_of(i).in_place()) {
      at::Tensor& g = params[i].mutable_grad();
      if (!g.defined())
        g = at::zeros_like(params[i], at::MemoryFormat::Contiguous);
      else if (!g.is_contiguous() || g.scalar_type() != params[i].scalar_type())
        g = g.to(params[i].scalar_type()).contiguous();
      if (zero) g.zero_();
    } else if (grad.defined() && !zero)
      scale_into(slot_of(i), grad);
    else
      slot_of(i).zero_();
    bucket_of(i).add_grad(place[i].second);
    return bucket_of(i);
  }

  // The averaged gradient of parameter i, back in .grad: a copy, or with
  // gradient_as_bucket_view the slot itself (when it has the parameter's dtype).
  void hand_back(size_t i) {
    if (bucket_of(i).in_place()) return;  // .grad holds it already
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

  // Launches the ready buckets in bucket order, up to the first one still filling.
  void launch_ready_locked() {
    for (GradBucket& bucket : buckets) {
      if (bucket.state() == BucketState::kFilling) return;
      if (bucket.state() != BucketState::kReady) continue;  // launched already
      ++stats.all_reduces;
      stats.bytes += bucket.bytes();
      bucket.launch(comm_thread, options.algorithm, options.tag, stats.synced_steps, params);
    }
  }

  // Armed -> reducing; finalize() is queued to run when the whole backward is
  // done, on the thread that called it (for CUDA tensors, not the engine's
  // thread that runs the hooks: comm/backward_thread.hpp).
  void start_reducing_locked() {
    transition(phase, Phase::kArmed, Phase::kReducing, "DDP's reducer");
    std::weak_ptr<ReducerState> weak = shared_from_this();
    caller.at_end([weak] {
      if (auto self = weak.lock()) self->finalize();
    });
  }

  // The post hook of parameter i's gradient accumulator.
  void on_grad_ready(size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    if (phase == Phase::kLocal) return;  // no_sync: the gradient stays in .grad, summed with the next ones
    if (phase == Phase::kArmed) start_reducing_locked();
    if (has_grad(i)) return;  // a second call (e.g. reentrant backward): already in its bucket
    rebuild.record(i);
    GradBucket& bucket = add_grad_locked(i, /*zero=*/false);
    trace::Span span(comm.recorder(), comm.world_rank(), kLaneDdp, "grad ready", "grad_ready");
    if (span.active()) {
      comm.label(span);
      span.set_name("grad " + names[i]).arg("param", i).arg("bucket", bucket.index()).arg("step", stats.synced_steps);
    }
    if (options.overlap && bucket.state() == BucketState::kReady) launch_ready_locked();
  }

  // Parameters whose hook did not fire in this backward are reduced all the
  // same, so that the other ranks' all-reduces complete: with what .grad
  // holds (earlier no_sync steps may have accumulated a gradient there:
  // pytorch#69031 lost exactly that), or zero. An error unless expected:
  // returns their names.
  std::string add_missing_locked() {
    std::string unused;
    for (size_t i = 0; i < params.size(); ++i) {
      if (has_grad(i)) continue;
      add_grad_locked(i, /*zero=*/!options.find_unused_parameters);
      if (!options.find_unused_parameters) unused += (unused.empty() ? "'" : ", '") + names[i] + "'";
    }
    return unused;
  }

  void wait_for(const std::vector<comm::WorkPtr>& launched) const {
    for (size_t b = 0; b < launched.size(); ++b) {
      try {
        launched[b]->wait();
      } catch (const comm::CommError& e) {  // the type kept: a timeout stays a timeout, an abort an abort
        comm::rethrow_with_context("DDP bucket " + std::to_string(b) + " of " + std::to_string(launched.size()) +
                                       " (" + std::to_string(plan.buckets[b].params.size()) + " parameters): ",
                                   e);
      }
    }
  }

  void finalize();
};

// Reducing -> armed: every bucket launched, waited for (without the lock),
// its gradients handed back. A no-op in any other phase.
void ReducerState::finalize() {
  std::unique_lock<std::mutex> lock(mutex);
  if (phase != Phase::kReducing) return;
  trace::Span span(comm.recorder(), comm.world_rank(), kLaneDdp, "wait for buckets", "ddp_wait");
  if (span.active()) {
    comm.label(span);
    span.arg("step", stats.synced_steps);
  }
  const std::string unused = add_missing_locked();
  launch_ready_locked();
  std::vector<comm::WorkPtr> launched;
  for (const GradBucket& bucket : buckets) launched.push_back(bucket.work());
  lock.unlock();
  wait_for(launched);
  lock.lock();
  for (GradBucket& bucket : buckets) bucket.reduced();
  for (size_t i = 0; i < params.size(); ++i) hand_back(i);
  for (GradBucket& bucket : buckets) bucket.reset();
  ++stats.synced_steps;
  transition(phase, Phase::kReducing, Phase::kArmed, "DDP's reducer");
  rebuild.step_done(params.size());
  if (!unused.empty())
    throw comm::CommError(
        comm.self() + ": DistributedDataParallel: parameter(s) " + unused +
        " got no gradient in this backward. If some parameters are not used in every step, construct DDP with "
        "find_unused_parameters = true (they are then reduced as zero); otherwise make every parameter "
        "contribute to the loss, or exclude it from the module (requires_grad false).");
}

Reducer::Reducer(comm::Communicator& comm, std::vector<at::Tensor> params, std::vector<std::string> names,
                 ReducerOptions options)
    : state_(std::make_shared<ReducerState>(comm, std::move(params), std::move(names), options)) {
  std::weak_ptr<ReducerState> weak = state_;
  hooks_ = std::make_unique<GradReadyHooks>(state_->params, [weak](size_t i) {
    if (auto state = weak.lock()) state->on_grad_ready(i);
  });
}

Reducer::~Reducer() = default;

// Local or armed -> local or armed, rebuilding the plan when due.
void Reducer::prepare_for_backward(bool sync) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->phase == Phase::kReducing)
    throw comm::CommError(state_->comm.self() +
                          ": DistributedDataParallel: the previous backward started reducing gradients but never "
                          "finished (was backward interrupted, or run with autograd::grad?); call finalize() or run "
                          "a full backward before the next forward");
  if (state_->rebuild.stage == Rebuild::kDue) state_->rebuild_plan_locked();
  state_->phase = sync ? Phase::kArmed : Phase::kLocal;
  state_->caller.capture();
  if (!sync) ++state_->stats.local_steps;
}

void Reducer::finalize() { state_->finalize(); }

const BucketPlan& Reducer::plan() const { return state_->plan; }

std::vector<at::Tensor> Reducer::bucket_buffers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<at::Tensor> out;
  for (const GradBucket& bucket : state_->buckets)
    if (!bucket.in_place()) out.push_back(bucket.buffer());
  return out;
}

ReducerStats Reducer::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace distlab::ddp
