#include "pipeline/simulator.hpp"

#include <algorithm>
#include <cmath>

#include "pipeline/replay.hpp"

namespace distlab::pipeline {

double ActionCosts::seconds(const Action& a) const {
  const StageCosts& c = of(a.stage);
  switch (a.type) {
    case ActionType::kForward: return c.forward;
    case ActionType::kBackward: return c.backward;
    case ActionType::kBackwardInput: return c.backward_input;
    case ActionType::kBackwardWeight: return c.backward_weight;
    case ActionType::kSendF:
    case ActionType::kSendB: return message_s;
    case ActionType::kOverlapFB: return overlapped(a.stage, a.backward_stage);
    default: return 0.0;
  }
}

double ActionCosts::overlapped(int forward_stage, int backward_stage) const {
  const double f = of(forward_stage).forward, b = of(backward_stage).backward;
  return f + b - overlap * std::min(f, b);
}

std::string stage_lane(int stage) { return "stage " + std::to_string(stage); }

const char* action_category(ActionType type) {
  switch (type) {
    case ActionType::kForward: return "fwd";
    case ActionType::kBackward: return "bwd";
    case ActionType::kBackwardInput: return "bwd_input";
    case ActionType::kBackwardWeight: return "bwd_weight";
    case ActionType::kSendF:
    case ActionType::kSendB: return "send";
    case ActionType::kOverlapFB: return "overlap_fb";
    default: return "recv";
  }
}

Simulation simulate(const Schedule& schedule, const ActionCosts& costs, int cores) {
  const Replay played = replay(schedule, [&](const Action& a) { return costs.seconds(a); }, cores);
  if (!played.finished) throw ScheduleError(schedule.describe() + " cannot be simulated, deadlock: " + played.deadlock);
  const int p = schedule.ranks, S = schedule.num_stages();
  Simulation sim;
  sim.busy.assign(p, 0.0);
  sim.makespan = *std::max_element(played.rank_end.begin(), played.rank_end.end());
  // (time, +1 at F begin / -1 at the end of the last backward), per stage
  std::vector<std::vector<std::pair<double, int>>> changes(S);
  auto add_event = [&](int r, const Action& a, double begin, double end) {
    if (a.type == ActionType::kForward) changes[a.stage].push_back({begin, +1});
    const bool splits = costs.of(a.stage).splits_backward;
    if (a.type == ActionType::kBackward || (a.type == ActionType::kBackwardWeight && splits) ||
        (a.type == ActionType::kBackwardInput && !splits))
      changes[a.stage].push_back({end, -1});
    trace::Event e;
    e.rank = r;
    e.lane = is_compute(a.type) ? stage_lane(a.stage) : trace::kLaneComm;
    e.name = to_string(a);
    e.category = action_category(a.type);
    e.begin_us = std::llround(begin * 1e6);
    e.end_us = std::llround(end * 1e6);
    if (is_send(a.type) || is_recv(a.type)) {
      const bool toward_next = a.type == ActionType::kSendF || a.type == ActionType::kRecvB;
      e.peer = schedule.rank_of_stage(a.stage + (toward_next ? 1 : -1));
    }
    e.args = {{"stage", std::to_string(a.stage)},
              {"microbatch", std::to_string(a.microbatch)},
              {"schedule", kind_name(schedule.kind)}};
    sim.events.push_back(std::move(e));
  };
  for (int r = 0; r < p; ++r) {
    for (size_t k = 0; k < played.times[r].size(); ++k) {
      const Action& a = schedule.programs[r][k];
      const TimedAction& t = played.times[r][k];
      if (is_compute(a.type)) sim.busy[r] += t.end - t.begin;
      if (a.type != ActionType::kOverlapFB) {
        add_event(r, a, t.begin, t.end);
        continue;
      }
      const std::vector<Action> fb = parts(a);
      const double f = costs.seconds(fb[0]), b = costs.seconds(fb[1]);
      const double split = f + b > 0 ? t.begin + (t.end - t.begin) * f / (f + b) : t.begin;
      add_event(r, fb[0], t.begin, split);
      sim.events.back().args.emplace_back("compound", to_string(a));
      add_event(r, fb[1], split, t.end);
      sim.events.back().args.emplace_back("compound", to_string(a));
    }
  }
  sim.idle_fraction.resize(p);
  for (int r = 0; r < p; ++r) {
    sim.idle_fraction[r] = sim.makespan > 0 ? 1.0 - sim.busy[r] / sim.makespan : 0.0;
    sim.bubble += sim.idle_fraction[r] / p;
  }
  sim.peak_activations.assign(S, 0);
  sim.activations.resize(S);
  for (int s = 0; s < S; ++s) {
    auto& c = changes[s];
    // At equal times a release comes before a new forward: memory freed by a
    // finished backward is there for the forward that starts as it ends.
    std::sort(c.begin(), c.end());
    int held = 0;
    for (const auto& [time, delta] : c) {
      held += delta;
      sim.peak_activations[s] = std::max(sim.peak_activations[s], held);
      if (!sim.activations[s].empty() && sim.activations[s].back().first == time)
        sim.activations[s].back().second = held;
      else
        sim.activations[s].push_back({time, held});
    }
  }
  return sim;
}

}  // namespace distlab::pipeline
