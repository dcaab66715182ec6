#include "planner/schedule_shape.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "pipeline/simulator.hpp"

namespace distlab::planner {

std::pair<int64_t, int> HeldMicrobatches::peak(int rank, const std::vector<int64_t>& bytes) const {
  // Sweep the rank's stages' change points in time order (ties: the
  // releases first, as a backward ends before the next forward starts).
  struct Change {
    double time;
    int delta;
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
            [](const Change& a, const Change& b) { return a.time != b.time ? a.time < b.time : a.delta < b.delta; });
  int64_t now = 0, best = 0;
  int count = 0, best_count = 0;
  for (const Change& c : changes) {
    now += c.delta * bytes.at(static_cast<size_t>(c.stage));
    count += c.delta;
    if (now > best || (now == best && count > best_count)) best = now, best_count = count;
  }
  return {best, best_count};
}

const HeldMicrobatches& held_microbatches(pipeline::ScheduleKind kind, int P, int v, int m) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int>, std::unique_ptr<HeldMicrobatches>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{static_cast<int>(kind), P, v, m}];
  if (!slot) {
    const pipeline::Schedule schedule = pipeline::make_schedule(kind, P, m, v);
    pipeline::ActionCosts costs;  // F 1, B 2, I = W = 1
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
