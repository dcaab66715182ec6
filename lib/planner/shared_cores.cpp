#include "planner/shared_cores.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "pipeline/replay.hpp"

namespace distlab::planner {

SharedRun run_on_shared_cores(const pipeline::Schedule& schedule, const SharedCosts& costs) {
  using pipeline::Action;
  const int p = static_cast<int>(schedule.programs.size());
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<size_t> pos(static_cast<size_t>(p), 0);
  std::vector<double> left(static_cast<size_t>(p), 0);    // work left of the running action, seconds alone
  std::vector<bool> running(static_cast<size_t>(p), false);
  std::vector<double> start(static_cast<size_t>(p), 0), free_at(static_cast<size_t>(p), 0);
  std::vector<bool> waited(static_cast<size_t>(p), false);  // found its message not yet there
  std::map<std::string, double> arrival;  // posted messages not yet received
  SharedRun out;
  out.busy.assign(static_cast<size_t>(p), 0);
  out.compute.resize(static_cast<size_t>(p));
  double now = 0;
  // Rank `ri`, not computing, moves on as far as it can at `now`: sends
  // post, an arrived message is taken, a compute action starts. Whether it moved.
  const auto advance = [&](size_t ri) {
    const auto& program = schedule.programs[ri];
    bool moved = false;
    while (!running[ri] && pos[ri] < program.size() && free_at[ri] <= now) {
      const Action& a = program[pos[ri]];
      if (pipeline::is_send(a.type)) {
        arrival[pipeline::message_of(a)] = now + costs.message_s;
      } else if (pipeline::is_recv(a.type)) {
        const auto it = arrival.find(pipeline::message_of(a));
        if (it == arrival.end() || it->second > now) {
          waited[ri] = true;
          break;
        }
        arrival.erase(it);
        if (waited[ri] && costs.wake_s > 0) free_at[ri] = now + costs.wake_s;  // asleep: it goes a little later
        waited[ri] = false;
      } else {
        running[ri] = true;
        left[ri] = costs.seconds(a);
        start[ri] = now;
      }
      ++pos[ri];
      moved = true;
    }
    return moved;
  };
  for (;;) {
    // Again while one rank's send lets another's receive through.
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t ri = 0; ri < static_cast<size_t>(p); ++ri) moved = advance(ri) || moved;
    }
    int busy = 0;
    for (int r = 0; r < p; ++r) busy += running[static_cast<size_t>(r)] ? 1 : 0;
    const double speed = busy > 0 ? 1.0 / costs.slowdown(double(busy * costs.copies)) : 0.0;
    // The next thing to happen: an action ends, a message arrives, a woken rank may go.
    double next = kNever;
    for (int r = 0; r < p; ++r) {
      const size_t ri = static_cast<size_t>(r);
      if (running[ri]) next = std::min(next, now + left[ri] / speed);
      if (free_at[ri] > now) next = std::min(next, free_at[ri]);
    }
    for (const auto& [message, at] : arrival)
      if (at > now) next = std::min(next, at);
    if (next == kNever) break;
    const double dt = next - now;
    for (int r = 0; r < p; ++r) {
      const size_t ri = static_cast<size_t>(r);
      if (!running[ri]) continue;
      out.busy[ri] += dt;
      left[ri] -= dt * speed;
      if (left[ri] <= 1e-12 * std::max(1.0, next)) {
        running[ri] = false;
        out.compute[ri].push_back({start[ri], next});
      }
    }
    now = next;
  }
  std::string deadlock;
  for (int r = 0; r < p; ++r) {
    const size_t ri = static_cast<size_t>(r);
    if (pos[ri] == schedule.programs[ri].size()) continue;
    if (!deadlock.empty()) deadlock += "; ";
    deadlock += "rank " + std::to_string(r) + " waits at action " + std::to_string(pos[ri]) + " (" +
                pipeline::to_string(schedule.programs[ri][pos[ri]]) + ")";
  }
  if (!deadlock.empty())
    throw pipeline::ScheduleError(schedule.describe() + " cannot run on shared cores, deadlock: " + deadlock);
  out.makespan = now;
  for (int r = 0; r < p; ++r)
    out.bubble += now > 0 ? (1.0 - out.busy[static_cast<size_t>(r)] / now) / p : 0.0;
  return out;
}

}  // namespace distlab::planner
