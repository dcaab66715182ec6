#include "experts/moe.hpp"

#include <ATen/ATen.h>

#include <numeric>
#include <stdexcept>
#include <string>

#include "experts/aux_loss.hpp"
#include "experts/exchange.hpp"
#include "experts/trace_counts.hpp"
#include "memory/recompute.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"

namespace distlab::experts {
namespace {

int64_t sum(const std::vector<int64_t>& v, size_t from = 0, size_t count = SIZE_MAX) {
  const size_t end = std::min(v.size(), count == SIZE_MAX ? v.size() : from + count);
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(end),
                         int64_t{0});
}

// The forward's phases, timed for MoeStats and, expert parallel, recorded
// on the trace as they end (one event each, category "moe", on the compute
// lane), so that a timeline shows where the exchanges' waits fall. Both
// read the trace's clock: a phase's seconds are its event's length.
class Phases {
 public:
  explicit Phases(MoeStats* stats, const comm::Communicator* group = nullptr) : stats_(stats), group_(group) {}
  // The time since the last mark into `phase` (of stats, when kept), and
  // onto the trace as `name`.
  void mark(double MoeStats::*phase, const char* name) {
    const int64_t now = trace::now_us();
    if (stats_ != nullptr) stats_->*phase = double(now - last_) * 1e-6;
    trace::Recorder* recorder = group_ != nullptr ? group_->recorder() : nullptr;
    if (recorder != nullptr && recorder->enabled()) {
      trace::Event e{group_->world_rank(), trace::kLaneCompute, name, "moe", last_, now, 0, -1, 0, {}};
      if (!group_->is_world()) e.args.emplace_back("group", group_->group());
      recorder->record(e);
    }
    last_ = now;
  }

 private:
  MoeStats* stats_;
  const comm::Communicator* group_;
  int64_t last_ = trace::now_us();
};

void note(MoeStats* stats, const DispatchPlan& plan) {
  if (stats == nullptr) return;
  stats->kept = plan.kept;
  stats->dropped = plan.dropped;
  stats->capacity = plan.capacity;
}

}  // namespace

int64_t experts_per_rank(int64_t experts, int group_size) {
  if (group_size < 1 || experts % group_size != 0)
    throw std::invalid_argument("expert parallelism gives each of the " + std::to_string(group_size) +
                                " ranks of an expert group the same number of experts: " + std::to_string(experts) +
                                " experts do not divide by " + std::to_string(group_size));
  return experts / group_size;
}

at::Tensor moe_local(const at::Tensor& x, const Routing& routing, ExpertMlpsImpl& experts, const MoeOptions& options,
                     MoeStats* stats) {
  Phases phases(stats);
  const DispatchPlan plan = plan_dispatch(routing.experts, options.experts, options.capacity_factor);
  note(stats, plan);
  const int64_t pad_to = options.pad && plan.capacity > 0 ? plan.capacity : 0;
  const at::Tensor sorted = dispatch(x, plan);
  phases.mark(&MoeStats::dispatch_s, "moe dispatch");
  const at::Tensor out = run_sorted(sorted, plan.kept, pad_to,
                                    [&](int64_t e, const at::Tensor& rows) { return experts.forward(e, rows); });
  phases.mark(&MoeStats::experts_s, "moe experts");
  at::Tensor y = combine(out, routing.weights, plan);
  phases.mark(&MoeStats::combine_s, "moe combine");
  return y;
}

at::Tensor moe_parallel(comm::Communicator& group, const at::Tensor& x, const Routing& routing, ExpertMlpsImpl& mine,
                        const MoeOptions& options, MoeStats* stats, int tag) {
  const int G = group.size();
  const int64_t m = experts_per_rank(options.experts, G);
  if (mine.count() != m || mine.first() != group.rank() * m)
    throw std::invalid_argument("expert parallelism: " + group.self() + " holds experts [" +
                                std::to_string(mine.first()) + ", " + std::to_string(mine.first() + mine.count()) +
                                "), its share is [" + std::to_string(group.rank() * m) + ", " +
                                std::to_string((group.rank() + 1) * m) + ")");
  Phases phases(stats, &group);
  // 1. My tokens routed and sorted by expert: rank q's experts come q-th.
  const DispatchPlan plan = plan_dispatch(routing.experts, options.experts, options.capacity_factor);
  note(stats, plan);
  std::vector<int64_t> send_rows(static_cast<size_t>(G));
  for (int q = 0; q < G; ++q) send_rows[static_cast<size_t>(q)] = sum(plan.kept, size_t(q) * size_t(m), size_t(m));
  // 2. What each rank sends me, per expert of mine: (G, m).
  const at::Tensor counts = at::tensor(plan.kept, at::kLong).view({G, m});
  const at::Tensor incoming = exchange_counts(group, counts, tag).contiguous();
  const int64_t* in = incoming.data_ptr<int64_t>();
  std::vector<int64_t> recv_rows(static_cast<size_t>(G), 0);
  for (int s = 0; s < G; ++s)
    for (int64_t j = 0; j < m; ++j) recv_rows[static_cast<size_t>(s)] += in[s * m + j];
  // 3. The rows to their experts' ranks: from rank s, my experts' rows in expert order.
  const at::Tensor arrived = exchange_rows(group, dispatch(x, plan), send_rows, recv_rows, tag + 1);
  // 4. Grouped by my expert (expert j: its rows from rank 0, then rank 1, ...), run, put back.
  std::vector<int64_t> order, per_expert(static_cast<size_t>(m), 0);
  for (int64_t j = 0; j < m; ++j) {
    int64_t from = 0;  // where rank s's block starts in `arrived`
    for (int s = 0; s < G; ++s) {
      const int64_t before = std::accumulate(in + s * m, in + s * m + j, int64_t{0});
      for (int64_t r = 0; r < in[s * m + j]; ++r) order.push_back(from + before + r);
      per_expert[static_cast<size_t>(j)] += in[s * m + j];
      from += recv_rows[static_cast<size_t>(s)];
    }
  }
  const at::Tensor by_expert = at::tensor(order, at::kLong).to(x.device());
  phases.mark(&MoeStats::dispatch_s, "moe dispatch");
  const int64_t pad_to = options.pad && plan.capacity > 0 ? plan.capacity * G : 0;
  const at::Tensor done = run_sorted(arrived.index_select(0, by_expert), per_expert, pad_to,
                                     [&](int64_t j, const at::Tensor& rows) { return mine.forward(j, rows); });
  phases.mark(&MoeStats::experts_s, "moe experts");
  const at::Tensor in_arrival_order = done.index_select(0, at::argsort(by_expert));
  // 5. Back to the ranks the rows came from; 6. weighted, per token.
  const at::Tensor back = exchange_rows(group, in_arrival_order, recv_rows, send_rows, tag + 2);
  if (stats != nullptr) stats->sent_rows = send_rows, stats->received_rows = recv_rows;
  at::Tensor y = combine(back, routing.weights, plan);
  phases.mark(&MoeStats::combine_s, "moe combine");
  return y;
}

void average_expert_gradients(comm::Communicator& copies, ExpertMlpsImpl& mine, int data_parallel) {
  average_expert_gradients(copies, mine.parameters(), data_parallel);
}

void average_expert_gradients(comm::Communicator& copies, const std::vector<at::Tensor>& experts, int data_parallel) {
  at::NoGradGuard no_grad;
  for (at::Tensor p : experts) {
    if (!p.grad().defined()) continue;
    at::Tensor g = p.mutable_grad();
    if (copies.size() > 1) copies.native_all_reduce(g);
    g.div_(data_parallel);
  }
}

MoeLayerImpl::MoeLayerImpl(Router router_, const ExpertMlps& whole, MoeOptions options, comm::Communicator* group,
                           double balance_coefficient, double z_coefficient)
    : options_(options), group_(group), balance_coefficient_(balance_coefficient), z_coefficient_(z_coefficient) {
  options_.experts = whole->count();
  if (router_->experts() != options_.experts)
    throw std::invalid_argument("MoE layer: a router for " + std::to_string(router_->experts()) + " experts and " +
                                std::to_string(options_.experts) + " experts");
  router = register_module("router", router_);
  experts = register_module("experts", ExpertMlps(whole->slice(0, whole->count())));  // a copy of all E
  if (parallel()) spread_over(*group_);  // then this rank's slice of them
}

MoeStats MoeLayerImpl::take_step_counts() {
  MoeStats out = std::move(step_counts_);
  step_counts_ = MoeStats{};
  return out;
}

void MoeLayerImpl::spread_over(comm::Communicator& group) {
  if (experts->count() != options_.experts)
    throw std::invalid_argument("MoE layer: spread_over() takes a layer holding all its experts (this one holds " +
                                std::to_string(experts->count()) + " of " + std::to_string(options_.experts) + ")");
  const int64_t m = experts_per_rank(options_.experts, group.size());
  experts = replace_module("experts", ExpertMlps(experts->slice(group.rank() * m, m)));
  group_ = &group;
}

at::Tensor MoeLayerImpl::forward(const at::Tensor& x) {
  const at::Tensor flat = x.reshape({-1, x.size(-1)});
  const Routing routing = router(flat);
  aux_loss_ = balancing_loss(routing) * balance_coefficient_ + z_loss(routing.logits) * z_coefficient_;
  const at::Tensor out = parallel() ? moe_parallel(*group_, flat, routing, *experts, options_, &stats_)
                                    : moe_local(flat, routing, *experts, options_, &stats_);
  if (is_training() && !memory::recomputing()) add_counts(step_counts_, stats_);  // once per forward
  const at::Tensor y = out.view(x.sizes());
  return aux_scale_ > 0 ? attach_aux_loss(y, aux_loss_, aux_scale_) : y;
}

}  // namespace distlab::experts
