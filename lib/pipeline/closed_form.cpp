#include "pipeline/closed_form.hpp"

#include <algorithm>

#include "pipeline/schedule_kinds.hpp"

namespace distlab::pipeline {

std::optional<ClosedForm> closed_form(ScheduleKind kind, int ranks, const ActionCosts& costs) {
  const KindInfo& info = kind_info(kind);
  if (!info.per_hop) return std::nullopt;
  const StageCosts& c = costs.uniform;
  BubbleTerms t;
  t.F = c.forward;
  t.B = c.backward;
  t.W = c.backward_weight;
  t.FB = t.F + t.B - costs.overlap * std::min(t.F, t.B);  // DualPipe's F&B
  return ClosedForm{(ranks - 1) * info.per_hop(t), info.formula, info.exact_when};
}

bool exact_for_shape(ScheduleKind kind, int ranks, int microbatches) {
  return kind_info(kind).exact_for(ranks, microbatches);
}

std::optional<double> closed_form_bubble(const Schedule& schedule, const ActionCosts& costs) {
  const std::optional<ClosedForm> form = closed_form(schedule.kind, schedule.ranks, costs);
  if (!form) return std::nullopt;
  std::vector<double> work;
  for (const auto& program : schedule.programs) {
    double w = 0;
    for (const Action& a : program) w += is_compute(a.type) ? costs.seconds(a) : 0.0;
    work.push_back(w);
  }
  const double step = form->idle_s + *std::min_element(work.begin(), work.end());
  if (step <= 0) return 0.0;
  double bubble = 0;
  for (double w : work) bubble += (1.0 - w / step) / static_cast<double>(work.size());
  return bubble;
}

}  // namespace distlab::pipeline
