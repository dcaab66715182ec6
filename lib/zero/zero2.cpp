#include "zero/zero2.hpp"

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <mutex>

#include "collectives/async.hpp"
#include "collectives/collectives.hpp"
#include "comm/backward_thread.hpp"

namespace distlab::zero {

// The hooks' side of Zero2: buckets being filled and reduce-scattered.
struct GradShardState : std::enable_shared_from_this<GradShardState> {
  explicit GradShardState(ShardedOptimizer& s) : sharded(s), comm(s.comm()), comm_thread(s.comm()) {
    const ShardLayout& layout = sharded.layout();
    bucket_of = layout.plan.bucket_of();
    offset_of = layout.plan.offset_of();
    reset_step();
  }

  ShardedOptimizer& sharded;
  comm::Communicator& comm;
  collectives::CommThread comm_thread;
  // Each parameter holds its gradient accumulator weakly: these keep them
  // (and so the hooks on them) alive across steps.

  std::mutex mutex;
  std::vector<int> bucket_of;
  std::vector<int64_t> offset_of;
  std::vector<at::Tensor> buffers;   // a bucket's flat buffer, from its first gradient until launched
  std::vector<int> pending;          // gradients each bucket still waits for
  std::vector<comm::WorkPtr> works;  // launched reduce-scatters
  std::vector<bool> ready;           // per parameter, this backward
  int next_launch = 0;               // buckets launch strictly in order, as every rank does
  int landed = 0;                    // launched buckets whose reduce-scatter was awaited, this backward
  bool sync = true;
  // The rank's thread, which calls backward (captured where it constructs and steps).
  comm::BackwardCaller caller;
  bool reducing = false;             // a synchronized backward is under way
  Zero2Stats stats;

  void reset_step() {
    const auto& buckets = sharded.layout().plan.buckets;
    pending.clear();
    for (const ddp::Bucket& b : buckets) pending.push_back(static_cast<int>(b.params.size()));
    buffers.assign(buckets.size(), at::Tensor());
    works.assign(buckets.size(), nullptr);
    ready.assign(sharded.params().size(), false);
    next_launch = 0;
    landed = 0;
    reducing = false;
  }

  // Every launched bucket's reduce-scatter awaited: its buffer is freed.
  void await_launched(std::unique_lock<std::mutex>& lock) {
    while (landed < next_launch) {
      const int b = landed++;
      const comm::WorkPtr work = works[static_cast<size_t>(b)];
      lock.unlock();
      ShardedOptimizer::wait_naming(work, comm.self() + ": reduce-scatter of ZeRO-2 bucket " + std::to_string(b));
      lock.lock();
    }
  }

  // Parameter i's gradient / p into its slot (zeros when it has none), and
  // the full .grad dropped: from here on only the bucket holds it.
  void take(std::unique_lock<std::mutex>& lock, size_t i) {
    const at::Tensor& p = sharded.params()[i];
    const auto b = static_cast<size_t>(bucket_of[i]);
    if (!buffers[b].defined()) {
      // One reduce-scatter in flight at most, and none once a bucket is
      // made: the buckets launched before land first, so a backward holds
      // the buckets being filled and no launched one whatever the comm
      // thread's pace (a reduce-scatter still overlaps the gradients
      // computed until the next bucket's first), and the rank's peak can be
      // predicted (planner/memory_model.hpp).
      await_launched(lock);
      buffers[b] = at::empty({sharded.layout().plan.buckets[b].numel}, p.options());  // (bucket numel,)
      sharded.peaks().buffer_allocated(static_cast<int64_t>(buffers[b].nbytes()));
    }
    at::Tensor slot = buffers[b].narrow(0, offset_of[i], p.numel());
    const at::Tensor& grad = p.grad();
    if (grad.defined())
      at::mul_out(slot, grad.reshape({-1}), at::native::wrapped_scalar_tensor(1.0 / comm.size()));
    else
      slot.zero_();
    p.mutable_grad() = at::Tensor();
    ready[i] = true;
    --pending[b];
  }

  // Gradients this backward has not produced yet.
  int64_t grads_pending_locked() const {
    int64_t total = 0;
    for (int n : pending) total += n;
    return total;
  }

  void launch_ready_locked() {
    const ShardLayout& layout = sharded.layout();
    while (next_launch < layout.buckets() && pending[static_cast<size_t>(next_launch)] == 0) {
      const int b = next_launch++;
      at::Tensor buffer = std::move(buffers[static_cast<size_t>(b)]);
      ++stats.reduce_scatters;
      stats.bytes += static_cast<int64_t>(buffer.nbytes());
      ShardedOptimizer* target = &sharded;
      // Above 0 for a bucket queued while backward still computes: the overlap, as a cause.
      const SubmittedWhen submitted = {{"grads pending at submit", grads_pending_locked()}};
      // The bucket's memory goes back as soon as its chunk is taken.
      works[static_cast<size_t>(b)] = comm_thread.submit(
          comm.self() + ": reduce-scatter of ZeRO-2 bucket " + std::to_string(b),
          [target, buffer, b, submitted]() mutable {
            const auto bytes = static_cast<int64_t>(buffer.nbytes());
            target->reduce_scatter_bucket(b, std::move(buffer), "reduce-scatter bucket " + std::to_string(b),
                                          submitted);
            target->peaks().buffer_freed(bytes);
          });
    }
  }

  void on_grad_ready(size_t i) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!sync) return;  // no_sync: the gradient stays in .grad, summed with the next micro-steps'
    if (!reducing) {
      reducing = true;
      // Runs when the whole backward is done, on the thread that called it.
      std::weak_ptr<GradShardState> weak = shared_from_this();
      caller.at_end([weak] {
        if (auto self = weak.lock()) self->finalize();
      });
    }
    if (ready[i]) return;  // a second call within one backward: already in its bucket
    take(lock, i);
    launch_ready_locked();
  }

  void finalize() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!reducing) return;
    trace::Span span(comm.recorder(), comm.world_rank(), kLaneZero, "wait for buckets", "zero_wait");
    if (span.active()) {
      comm.label(span);
      span.arg("stage", sharded.who()).arg("step", stats.synced_steps);
    }
    for (size_t i = 0; i < ready.size(); ++i)
      if (!ready[i]) take(lock, i);  // unused this backward: its no_sync .grad, or zeros
    launch_ready_locked();
    std::vector<comm::WorkPtr> launched = works;
    lock.unlock();
    for (size_t b = 0; b < launched.size(); ++b)
      ShardedOptimizer::wait_naming(launched[b],
                                    "ZeRO-2 bucket " + std::to_string(b) + " of " + std::to_string(launched.size()));
    lock.lock();
    ++stats.synced_steps;
    reset_step();
  }
};

Zero2::Zero2(comm::Communicator& comm, torch::nn::Module& module, const OptimizerFactory& make_optimizer,
             ZeroOptions options)
    : sharded_(comm, module, make_optimizer, options, Stage::kZero2, pack_by_size(options, BucketOrder::kBackward),
               ShardStorage::kViewsOfParameters),
      state_(std::make_shared<GradShardState>(sharded_)) {
  state_->caller.capture();
  // After accumulation, so the sum of no_sync micro-steps is included.
  std::weak_ptr<GradShardState> weak = state_;
  hooks_ = std::make_unique<ddp::GradReadyHooks>(sharded_.params(), [weak](size_t i) {
    if (auto state = weak.lock()) state->on_grad_ready(i);
  });
}

Zero2::~Zero2() = default;

Zero2::NoSync Zero2::no_sync() {
  return NoSync([state = state_](bool sync) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->sync = sync;
  });
}

void Zero2::zero_grad() {
  check_reduced();
  state_->caller.capture();
  for (const at::Tensor& p : sharded_.params()) p.mutable_grad() = at::Tensor();
  sharded_.zero_shard_grad();
}

// A synchronized backward's end-of-backward callback waits for its buckets;
// a backward interrupted by an exception never gets there.
void Zero2::check_reduced() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->reducing)
    throw comm::CommError(sharded_.comm().self() +
                          ": ZeRO-2: a backward started reduce-scattering gradients but never finished (was it "
                          "interrupted?); run a full backward before stepping");
}

double Zero2::clip_grad_norm(double max_norm) {
  check_reduced();
  return sharded_.clip_grad_norm(max_norm);
}

void Zero2::step() {
  check_reduced();
  sharded_.refuse_unreduced_grads();
  sharded_.step();
}

Zero2Stats Zero2::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace distlab::zero
