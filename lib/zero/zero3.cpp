#include "zero/zero3.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "collectives/async.hpp"
#include "comm/backward_thread.hpp"
#include "zero/storage.hpp"

namespace distlab::zero {
namespace {

ZeroOptions zero_options(const Zero3Options& o) {
  ZeroOptions options;
  options.algorithm = o.algorithm;
  options.tag = o.tag;
  return options;
}

// "3.weight" -> "3": the Sequential child a parameter belongs to.
std::string child_of(const std::string& name) { return name.substr(0, name.find('.')); }

// One bucket per unit: the consecutive parameters of one child, in registration order.
ddp::BucketPlan pack_by_unit(const std::vector<ddp::ParamInfo>& infos) {
  ddp::BucketPlan plan;
  plan.params = infos;
  for (size_t i = 0; i < infos.size(); ++i) {
    plan.order.push_back(static_cast<int>(i));
    if (i == 0 || child_of(infos[i].name) != child_of(infos[i - 1].name)) plan.buckets.emplace_back();
    ddp::Bucket& unit = plan.buckets.back();
    unit.params.push_back(static_cast<int>(i));
    unit.bytes += infos[i].bytes();
    unit.numel += infos[i].numel;
    unit.limit = unit.bytes;
  }
  return plan;
}

}  // namespace

// The hooks' and the forward's shared state: which units are whole, the
// all-gathers and reduce-scatters in flight.
struct Zero3State : std::enable_shared_from_this<Zero3State> {
  enum class Held { kFreed, kGathering, kWhole };

  Zero3State(ShardedOptimizer& s, const Zero3Options& o) : sharded(s), comm(s.comm()), options(o), comm_thread(s.comm()) {
    const ShardLayout& layout = sharded.layout();
    unit_of = layout.plan.bucket_of();
    const std::vector<int64_t> offset_of = layout.plan.offset_of();
    torch::NoGradGuard no_grad;
    for (int u = 0; u < layout.buckets(); ++u) {
      // The unit's parameters become views into one buffer (numel,), whose bytes are then given back.
      at::Tensor buffer = flat_parameters(layout, u, sharded.params()).clone();
      for (int i : layout.plan.buckets[static_cast<size_t>(u)].params) {
        const at::Tensor& p = sharded.params()[static_cast<size_t>(i)];
        p.set_data(buffer.narrow(0, offset_of[static_cast<size_t>(i)], p.numel()).view(p.sizes()));
      }
      release_storage(buffer);
      buffers.push_back(buffer);
    }
    held.assign(buffers.size(), Held::kFreed);
    gathers.assign(buffers.size(), nullptr);
    reset_backward();
  }

  ShardedOptimizer& sharded;
  comm::Communicator& comm;
  Zero3Options options;
  collectives::CommThread comm_thread;

  mutable std::mutex mutex;
  std::vector<at::Tensor> buffers;     // per unit (numel,): the parameters are views into it
  std::vector<Held> held;
  std::vector<comm::WorkPtr> gathers;  // per unit, while kGathering
  std::vector<int> unit_of;            // per parameter
  std::vector<int> pending;            // per unit: parameters whose gradient is not final this backward
  std::vector<bool> ready;             // per parameter, this backward
  std::vector<std::pair<int, comm::WorkPtr>> reductions;  // this backward's, (unit, work)
  bool sync = true;
  comm::BackwardCaller caller;  // the thread of the forward, which calls backward
  bool in_backward = false;
  bool whole = false;                  // inside whole_parameters(): nothing is freed
  int begun = 0;                       // units whose forward (or backward) this pass has begun
  Zero3Stats stats;

  int units() const { return static_cast<int>(buffers.size()); }
  int64_t unit_bytes(int u) const { return buffers[static_cast<size_t>(u)].numel() * buffers[0].element_size(); }
  std::string unit(int u) const { return "ZeRO-3 unit " + std::to_string(u) + " of " + std::to_string(units()); }

  void reset_backward() {
    pending.clear();
    for (const ddp::Bucket& b : sharded.layout().plan.buckets) pending.push_back(static_cast<int>(b.params.size()));
    ready.assign(sharded.params().size(), false);
    reductions.clear();
    in_backward = false;
  }

  // Unit u+1's prefetch is queued with "forwards begun at submit" = u: before unit u computes.
  SubmittedWhen submitted_when(const std::string& phase) const {
    if (phase == "forward") return {{"forwards begun at submit", begun}};
    if (phase == "backward") return {{"backwards begun at submit", begun}};
    return {};
  }

  void launch_gather_locked(int u, const char* phase) {
    if (held[static_cast<size_t>(u)] != Held::kFreed) return;
    const at::Tensor buffer = buffers[static_cast<size_t>(u)];
    reallocate_storage(buffer, unit_bytes(u));
    held[static_cast<size_t>(u)] = Held::kGathering;
    ++stats.all_gathers;
    stats.gathered_bytes += unit_bytes(u);
    const int whole = static_cast<int>(std::count_if(held.begin(), held.end(), [](Held h) { return h != Held::kFreed; }));
    stats.max_gathered_units = std::max(stats.max_gathered_units, whole);
    const std::string name = "all-gather unit " + std::to_string(u) + " (" + phase + ")";
    ShardedOptimizer* source = &sharded;
    gathers[static_cast<size_t>(u)] =
        comm_thread.submit(comm.self() + ": " + name, [source, buffer, u, name, submitted = submitted_when(phase)] {
          source->all_gather_bucket(u, buffer, name, submitted);
        });
  }

  // Returns with unit u whole: launched now if it was not.
  void wait_whole(std::unique_lock<std::mutex>& lock, int u, const char* phase) {
    launch_gather_locked(u, phase);
    if (held[static_cast<size_t>(u)] != Held::kGathering) return;
    const comm::WorkPtr work = gathers[static_cast<size_t>(u)];
    lock.unlock();
    {
      // Compute stands still here: what the overlap (overlap.hpp) takes out of compute.
      trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneCompute, "wait", "zero_wait");
      if (span.active())
        span.set_name("wait for unit " + std::to_string(u)).arg("unit", u).arg("step", sharded.steps());
      ShardedOptimizer::wait_naming(work, comm.self() + ": all-gather of " + unit(u));
    }
    lock.lock();
    held[static_cast<size_t>(u)] = Held::kWhole;
    gathers[static_cast<size_t>(u)] = nullptr;
  }

  void free(std::unique_lock<std::mutex>& lock, int u) {
    if (whole) return;
    wait_whole(lock, u, "");  // a prefetch still in flight must land before its bytes go
    release_storage(buffers[static_cast<size_t>(u)]);
    held[static_cast<size_t>(u)] = Held::kFreed;
  }

  // whole_parameters(): every unit gathered (launched together, then awaited).
  void gather_every_unit() {
    std::unique_lock<std::mutex> lock(mutex);
    for (int u = 0; u < units(); ++u) launch_gather_locked(u, "whole");
    for (int u = 0; u < units(); ++u) wait_whole(lock, u, "whole");
    whole = true;
  }

  // Its end: my chunk of every unit back into the shard, the units freed.
  void write_back_and_free() {
    std::unique_lock<std::mutex> lock(mutex);
    whole = false;
    torch::NoGradGuard no_grad;
    const int rank = comm.rank();
    for (int u = 0; u < units(); ++u) {
      const collectives::Range mine = sharded.layout().chunk(u, rank);
      sharded.shard()[static_cast<size_t>(u)].copy_(buffers[static_cast<size_t>(u)].narrow(0, mine.offset, mine.count));
      free(lock, u);
    }
  }

  void start_backward_locked() {
    if (in_backward) return;
    in_backward = true;
    begun = 0;
    // Runs when the whole backward is done, on the thread that called it.
    std::weak_ptr<Zero3State> weak = shared_from_this();
    caller.at_end([weak] {
      if (auto self = weak.lock()) self->finalize();
    });
  }

  // Backward is about to enter unit u (a hook on its forward output).
  void before_backward(int u) {
    std::unique_lock<std::mutex> lock(mutex);
    start_backward_locked();
    launch_gather_locked(u, "backward");
    if (options.prefetch && u > 0) launch_gather_locked(u - 1, "backward");
    wait_whole(lock, u, "backward");
    ++begun;
  }

  // Unit u's gradients are final: reduce-scatter them (unless no_sync) and free its parameters.
  void unit_done(std::unique_lock<std::mutex>& lock, int u) {
    if (sync) {
      // One reduce-scatter in flight: the previous unit's lands before this
      // one's flat copy is made, so a backward holds one flat copy beside
      // the gradients whatever the comm thread's pace (it still overlaps
      // this unit's whole backward), and the rank's peak can be predicted.
      if (!reductions.empty()) {
        const auto [previous, work] = reductions.back();
        lock.unlock();
        ShardedOptimizer::wait_naming(work, comm.self() + ": reduce-scatter of " + unit(previous));
        lock.lock();
      }
      const ShardLayout& layout = sharded.layout();
      at::Tensor flat = flat_gradients(layout, u, sharded.params(), 1.0 / comm.size());  // (unit numel,)
      for (int i : layout.plan.buckets[static_cast<size_t>(u)].params)
        sharded.params()[static_cast<size_t>(i)].mutable_grad() = at::Tensor();
      ++stats.reduce_scatters;
      stats.reduced_bytes += static_cast<int64_t>(flat.nbytes());
      sharded.peaks().buffer_allocated(static_cast<int64_t>(flat.nbytes()));
      ShardedOptimizer* target = &sharded;
      const std::string name = "reduce-scatter unit " + std::to_string(u);
      reductions.emplace_back(u, comm_thread.submit(comm.self() + ": " + name, [target, flat, u, name]() mutable {
        const auto bytes = static_cast<int64_t>(flat.nbytes());
        target->reduce_scatter_bucket(u, std::move(flat), name);
        target->peaks().buffer_freed(bytes);
      }));
    }
    if (held[static_cast<size_t>(u)] != Held::kFreed) free(lock, u);
  }

  void on_grad_ready(size_t i) {
    std::unique_lock<std::mutex> lock(mutex);
    start_backward_locked();
    if (ready[i]) return;  // a second call within one backward: already counted
    ready[i] = true;
    const int u = unit_of[i];
    if (--pending[static_cast<size_t>(u)] == 0) unit_done(lock, u);
  }

  void finalize() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!in_backward) return;
    // A unit some of whose parameters took no part: reduced with what .grad holds, or zeros.
    for (int u = 0; u < units(); ++u)
      if (pending[static_cast<size_t>(u)] > 0) {
        pending[static_cast<size_t>(u)] = 0;
        unit_done(lock, u);
      }
    for (int u = 0; u < units(); ++u)
      if (held[static_cast<size_t>(u)] != Held::kFreed) free(lock, u);  // prefetched, never used
    const auto launched = reductions;
    lock.unlock();
    for (const auto& [u, work] : launched)
      ShardedOptimizer::wait_naming(work, comm.self() + ": reduce-scatter of " + unit(u));
    lock.lock();
    if (sync) ++stats.synced_steps;
    reset_backward();
  }
};

Zero3::Zero3(comm::Communicator& comm, torch::nn::Sequential model, const OptimizerFactory& make_optimizer,
             Zero3Options options)
    : model_(std::move(model)),
      sharded_(comm, *model_, make_optimizer, zero_options(options), Stage::kZero3, pack_by_unit, ShardStorage::kOwn),
      state_(std::make_shared<Zero3State>(sharded_, options)) {
  // Which unit each child is (-1: no trainable parameters).
  for (const auto& item : model_->named_children()) {
    int unit = -1;
    for (int u = 0; u < units(); ++u)
      if (child_of(unit_name(u)) == item.key()) unit = u;
    unit_of_child_.push_back(unit);
  }
  std::weak_ptr<Zero3State> weak = state_;
  hooks_ = std::make_unique<ddp::GradReadyHooks>(sharded_.params(), [weak](size_t i) {
    if (auto state = weak.lock()) state->on_grad_ready(i);
  });
}

Zero3::~Zero3() = default;

int Zero3::units() const { return state_->units(); }

const std::string& Zero3::unit_name(int unit) const {
  return layout().plan.params[static_cast<size_t>(layout().plan.buckets.at(static_cast<size_t>(unit)).params.front())]
      .name;
}

bool Zero3::gathered(int unit) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->held.at(static_cast<size_t>(unit)) != Zero3State::Held::kFreed;
}

Zero3Stats Zero3::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

at::Tensor Zero3::forward(const at::Tensor& input) {
  check_idle("forward");
  comm::Communicator& comm = sharded_.comm();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->begun = 0;
    state_->caller.capture();
  }
  at::Tensor h = input;
  size_t child = 0;
  for (auto& module : *model_) {
    const int u = unit_of_child_[child++];
    if (u < 0) {
      h = module.forward(h);
      continue;
    }
    {
      std::unique_lock<std::mutex> lock(state_->mutex);
      state_->wait_whole(lock, u, "forward");
      if (state_->options.prefetch && u + 1 < units()) state_->launch_gather_locked(u + 1, "forward");
      ++state_->begun;
    }
    {
      trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneCompute, "forward", "zero_forward");
      if (span.active()) {
        comm.label(span);
        span.set_name("forward unit " + std::to_string(u)).arg("unit", u).arg("step", sharded_.steps());
      }
      h = module.forward(h);
    }
    if (torch::autograd::GradMode::is_enabled() && h.requires_grad()) {
      std::weak_ptr<Zero3State> weak = state_;
      h.register_hook([weak, u](const at::Tensor&) {
        if (auto state = weak.lock()) state->before_backward(u);
      });
    }
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->free(lock, u);
  }
  return h;
}

Zero3::NoSync Zero3::no_sync() {
  return NoSync([state = state_](bool sync) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->sync = sync;
  });
}

// Between steps nothing may be in flight: a backward that was interrupted
// never reached its end-of-backward callback.
void Zero3::check_idle(const char* what) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->in_backward)
    throw comm::CommError(sharded_.comm().self() + ": ZeRO-3: " + what +
                          " while a backward that started gathering and reduce-scattering units never finished (was "
                          "it interrupted?); run a full backward first");
}

void Zero3::refuse_inside_whole(const std::string& why) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->whole) throw std::logic_error(sharded_.comm().self() + ": ZeRO-3: " + why);
}

void Zero3::zero_grad() {
  check_idle("zero_grad");
  for (const at::Tensor& p : sharded_.params()) p.mutable_grad() = at::Tensor();
  sharded_.zero_shard_grad();
}

double Zero3::clip_grad_norm(double max_norm) {
  check_idle("clip_grad_norm");
  return sharded_.clip_grad_norm(max_norm);
}

Zero3::WholeParameters::WholeParameters(std::shared_ptr<Zero3State> state) : state_(std::move(state)) {
  state_->gather_every_unit();
}

Zero3::WholeParameters::~WholeParameters() {
  if (state_) state_->write_back_and_free();
}

Zero3::WholeParameters Zero3::whole_parameters() {
  check_idle("whole_parameters");
  refuse_inside_whole("whole_parameters() while its guard already lives");
  return WholeParameters(state_);
}

void Zero3::step() {
  check_idle("step");
  refuse_inside_whole(
      "step() inside whole_parameters(): its end would write the old values back over the step; end the guard first");
  sharded_.refuse_unreduced_grads();
  sharded_.step_shard();
}

std::vector<at::Tensor> Zero3::full_parameters() {
  check_idle("full_parameters");
  torch::NoGradGuard no_grad;
  const ShardLayout& layout = sharded_.layout();
  std::vector<at::Tensor> full(sharded_.params().size());
  for (int u = 0; u < units(); ++u) {
    const ddp::Bucket& unit = layout.plan.buckets[static_cast<size_t>(u)];
    at::Tensor flat = at::empty({unit.numel}, sharded_.tensor_options());  // (unit numel,)
    sharded_.all_gather_bucket(u, flat, "all-gather unit " + std::to_string(u) + " (full parameters)");
    int64_t offset = 0;
    for (int i : unit.params) {
      const at::Tensor& p = sharded_.params()[static_cast<size_t>(i)];
      full[static_cast<size_t>(i)] = flat.narrow(0, offset, p.numel()).view(p.sizes()).clone();
      offset += p.numel();
    }
  }
  return full;
}

}  // namespace distlab::zero
