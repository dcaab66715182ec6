#include "experts/dispatch.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace distlab::experts {

int64_t capacity_of(int64_t tokens, int64_t top_k, double capacity_factor, int64_t experts) {
  if (capacity_factor <= 0) return -1;
  const double c = std::ceil(double(tokens) * double(top_k) * capacity_factor / double(experts));
  return std::max<int64_t>(1, static_cast<int64_t>(c));
}

int64_t DispatchPlan::kept_total() const { return std::accumulate(kept.begin(), kept.end(), int64_t{0}); }
int64_t DispatchPlan::dropped_total() const { return std::accumulate(dropped.begin(), dropped.end(), int64_t{0}); }

DispatchPlan plan_dispatch(const at::Tensor& chosen, int64_t experts, double capacity_factor) {
  if (chosen.dim() != 2) throw std::invalid_argument("dispatch: chosen experts must be (tokens, k)");
  DispatchPlan plan;
  plan.tokens = chosen.size(0);
  plan.top_k = chosen.size(1);
  plan.experts = experts;
  plan.capacity = capacity_of(plan.tokens, plan.top_k, capacity_factor, experts);
  plan.kept.assign(static_cast<size_t>(experts), 0);
  plan.dropped.assign(static_cast<size_t>(experts), 0);
  const at::Tensor ids = chosen.to(at::kCPU, at::kLong).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  // Priority: choice j of every token before choice j + 1, tokens in order.
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(experts));
  for (int64_t j = 0; j < plan.top_k; ++j)
    for (int64_t t = 0; t < plan.tokens; ++t) {
      const int64_t e = id[t * plan.top_k + j];
      if (e < 0 || e >= experts)
        throw std::invalid_argument("dispatch: expert " + std::to_string(e) + " of " + std::to_string(experts));
      auto& mine = by_expert[static_cast<size_t>(e)];
      if (plan.capacity >= 0 && static_cast<int64_t>(mine.size()) >= plan.capacity) {
        ++plan.dropped[static_cast<size_t>(e)];
        continue;
      }
      mine.push_back(t * plan.top_k + j);
    }
  std::vector<int64_t> slots;
  for (size_t e = 0; e < by_expert.size(); ++e) {
    plan.kept[e] = static_cast<int64_t>(by_expert[e].size());
    slots.insert(slots.end(), by_expert[e].begin(), by_expert[e].end());
  }
  plan.slots = at::tensor(slots, at::kLong);
  return plan;
}

at::Tensor dispatch(const at::Tensor& x, const DispatchPlan& plan) {
  const at::Tensor tokens = at::floor_divide(plan.slots, plan.top_k).to(x.device());
  return x.index_select(0, tokens);
}

at::Tensor combine(const at::Tensor& rows, const at::Tensor& weights, const DispatchPlan& plan) {
  const at::Tensor slots = plan.slots.to(rows.device());
  const at::Tensor tokens = at::floor_divide(slots, plan.top_k);
  const at::Tensor w = weights.reshape({-1}).index_select(0, slots).to(rows.scalar_type()).unsqueeze(1);
  return at::zeros({plan.tokens, rows.size(1)}, rows.options()).index_add(0, tokens, rows * w);
}

}  // namespace distlab::experts
