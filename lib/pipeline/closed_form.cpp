#include "pipeline/closed_form.hpp"

#include <algorithm>

namespace distlab::pipeline {

std::optional<ClosedForm> closed_form(ScheduleKind kind, int ranks, const ActionCosts& costs) {
  const StageCosts& c = costs.uniform;
  const double F = c.forward, B = c.backward, W = c.backward_weight, hops = ranks - 1;
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B: return ClosedForm{hops * (F + B), "(p-1)(F+B)", "any m"};
    case ScheduleKind::kInterleaved1F1B:
      return ClosedForm{hops * (F + B), "(p-1)(F+B) per chunk = (1/v)(p-1)(F+B) per rank", "m a multiple of p"};
    case ScheduleKind::kLoopedBFS: return std::nullopt;
    case ScheduleKind::kZeroBubbleH1: return ClosedForm{hops * (F + B - 2 * W), "(p-1)(F+B-2W)", "F = I = W, m >= p"};
    case ScheduleKind::kInterleavedZeroBubble:
      return ClosedForm{hops * (F + B - 2 * W), "(p-1)(F+B-2W) per chunk = 1/v of ZB-H1's per rank",
                        "W <= F, W <= I, m >= p"};
    case ScheduleKind::kZeroBubbleV:
      return ClosedForm{hops * F, "(p-1)F (the paper's zero inside each rank's run, plus the ramp)",
                        "F = I = W, m >= 2p-1"};
    case ScheduleKind::kDualPipeV: {
      const double fb = F + B - costs.overlap * std::min(F, B);  // DualPipe's F&B
      return ClosedForm{hops * (fb + B - 3 * W), "(PP/2-1)(F&B+B-3W), PP = 2p stages", "F = I = W, m >= 2p"};
    }
  }
  return std::nullopt;
}

bool exact_for_shape(ScheduleKind kind, int ranks, int microbatches) {
  switch (kind) {
    case ScheduleKind::kInterleaved1F1B: return microbatches % ranks == 0;
    case ScheduleKind::kZeroBubbleH1:
    case ScheduleKind::kInterleavedZeroBubble: return microbatches >= ranks;
    case ScheduleKind::kZeroBubbleV: return microbatches >= 2 * ranks - 1;
    case ScheduleKind::kLoopedBFS: return false;
    default: return true;
  }
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
