#include "pipeline/measure.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

namespace distlab::pipeline {

Measured measure(const std::vector<trace::Event>& events, const Schedule& schedule, int64_t step) {
  const int p = schedule.ranks, S = schedule.num_stages();
  Measured out;
  out.busy_s.assign(p, 0.0);
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  // per stage: summed seconds and counts of F, B, I, W
  std::vector<std::array<double, 4>> sum(S, {0, 0, 0, 0});
  std::vector<std::array<int, 4>> count(S, {0, 0, 0, 0});
  // per stage: (time, +1 when an F begins, -1 when a B or W ends)
  std::vector<std::vector<std::pair<int64_t, int>>> changes(S);
  for (const trace::Event& e : events) {
    if (e.lane.rfind("stage ", 0) != 0 || e.arg("schedule") != kind_name(schedule.kind)) continue;
    if (step >= 0 && e.arg("step") != std::to_string(step)) continue;
    if (e.rank < 0 || e.rank >= p) continue;
    // The step begins with its first action that is not a receive. Ranks
    // are not fenced between steps: a rank done with step k posts step k+1's
    // first receive while its neighbours still finish step k, and that wait
    // belongs to the previous step's tail, not to this step's bubble. The
    // simulator starts every rank at 0 the same way.
    if (e.category != "recv") first = std::min(first, e.begin_us);
    last = std::max(last, e.end_us);
    int kind = -1;
    if (e.category == "fwd") kind = 0;
    if (e.category == "bwd") kind = 1;
    if (e.category == "bwd_input") kind = 2;
    if (e.category == "bwd_weight") kind = 3;
    if (kind < 0) continue;
    const double seconds = e.duration_us() * 1e-6;
    out.busy_s[e.rank] += seconds;
    const int stage = std::stoi(e.arg("stage", "0"));
    if (stage < 0 || stage >= S) continue;
    sum[stage][kind] += seconds;
    ++count[stage][kind];
    if (kind == 0) changes[stage].push_back({e.begin_us, +1});
    if (kind == 1 || kind == 3) changes[stage].push_back({e.end_us, -1});
  }
  out.makespan_s = last > first ? (last - first) * 1e-6 : 0.0;
  out.idle_fraction.resize(p);
  for (int r = 0; r < p; ++r) {
    out.idle_fraction[r] = out.makespan_s > 0 ? 1.0 - out.busy_s[r] / out.makespan_s : 0.0;
    out.bubble += out.idle_fraction[r] / p;
  }
  out.costs.per_stage.resize(S);
  for (int s = 0; s < S; ++s) {
    auto mean = [&](int k) { return count[s][k] ? sum[s][k] / count[s][k] : 0.0; };
    out.costs.per_stage[s] = {mean(0), mean(1), mean(2), mean(3)};
  }
  out.peak_activations.assign(S, 0);
  for (int s = 0; s < S; ++s) {
    // At equal times a release comes first, as in the simulator.
    std::sort(changes[s].begin(), changes[s].end());
    int held = 0;
    for (const auto& change : changes[s]) out.peak_activations[s] = std::max(out.peak_activations[s], held += change.second);
  }
  return out;
}

}  // namespace distlab::pipeline
