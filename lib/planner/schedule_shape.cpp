#include "planner/schedule_shape.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "pipeline/simulator.hpp"

namespace distlab::planner {

std::pair<int64_t, int> HeldMicrobatches::peak(int rank, const std::vector<std::vector<int64_t>>& bytes,
                                               bool after_first_release) const {
  // Sweep the rank's stages' change points in time order (ties: the
  // releases first, as a backward ends before the next forward starts).
  struct Change {
    double time;
    int held;
    int stage;
  };
  std::vector<Change> changes;
  for (size_t s = 0; s < timeline.size(); ++s) {
    if (rank_of_stage[s] != rank) continue;
    int before = 0;
    for (const auto& [time, held] : timeline[s]) {
      changes.push_back({time, held - before, static_cast<int>(s)});
      before = held;
    }
  }
  std::sort(changes.begin(), changes.end(),
            [](const Change& a, const Change& b) { return a.time != b.time ? a.time < b.time : a.held < b.held; });
  std::vector<int> held(timeline.size(), 0);
  int64_t now = 0, best = 0;
  int count = 0, best_count = 0;
  bool released = false;
  for (const Change& c : changes) {
    // A point that does not raise its stage's count had a backward end at
    // it (the simulator merges an end with the next forward's start).
    released = released || c.held <= 0;
    const auto& stage_bytes = bytes.at(static_cast<size_t>(c.stage));
    int& h = held[static_cast<size_t>(c.stage)];
    now -= stage_bytes.at(static_cast<size_t>(h));
    h += c.held;
    now += stage_bytes.at(static_cast<size_t>(h));
    count += c.held;
    if (after_first_release && !released) continue;
    if (now > best || (now == best && count > best_count)) best = now, best_count = count;
  }
  return {best, best_count};
}

double HeldMicrobatches::last_release(int stage) const {
  const auto& points = timeline.at(static_cast<size_t>(stage));
  return points.empty() ? 0 : points.back().first;
}

int64_t HeldMicrobatches::others_before(int rank, int except, double time,
                                        const std::vector<std::vector<int64_t>>& bytes) const {
  int64_t sum = 0;
  for (size_t s = 0; s < timeline.size(); ++s) {
    if (rank_of_stage[s] != rank || static_cast<int>(s) == except) continue;
    int held = 0;
    for (const auto& [when, count] : timeline[s])
      if (when < time) held = count;
    sum += bytes.at(s).at(static_cast<size_t>(held));
  }
  return sum;
}

const HeldMicrobatches& held_microbatches(pipeline::ScheduleKind kind, int P, int v, int m, bool splits_backward) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, bool>, std::unique_ptr<HeldMicrobatches>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{static_cast<int>(kind), P, v, m, splits_backward}];
  if (!slot) {
    const pipeline::Schedule schedule = pipeline::make_schedule(kind, P, m, v);
    pipeline::ActionCosts costs;  // F 1, B 2, I = W = 1 (unsplit: I = 2, W = 0)
    costs.uniform.splits_backward = splits_backward;
    if (!splits_backward) costs.uniform.backward_input = 2, costs.uniform.backward_weight = 0;
    const pipeline::Simulation sim = pipeline::simulate(schedule, costs);
    auto held = std::make_unique<HeldMicrobatches>();
    held->ranks = P;
    for (int s = 0; s < P * v; ++s) held->rank_of_stage.push_back(pipeline::rank_of_stage(s, P, pipeline::placement_of(kind)));
    held->timeline = sim.activations;
    slot = std::move(held);
  }
  return *slot;
}

}  // namespace distlab::planner
