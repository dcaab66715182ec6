#include "pipeline/replay.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace distlab::pipeline {

std::string message_of(const Action& a) {
  const int s = a.stage;
  switch (a.type) {
    case ActionType::kSendF: return std::to_string(s) + "->" + std::to_string(s + 1) + " F mb " + std::to_string(a.microbatch);
    case ActionType::kRecvF: return std::to_string(s - 1) + "->" + std::to_string(s) + " F mb " + std::to_string(a.microbatch);
    case ActionType::kSendB: return std::to_string(s) + "->" + std::to_string(s - 1) + " B mb " + std::to_string(a.microbatch);
    case ActionType::kRecvB: return std::to_string(s + 1) + "->" + std::to_string(s) + " B mb " + std::to_string(a.microbatch);
    default: return "";
  }
}

Replay replay(const Schedule& schedule, const std::function<double(const Action&)>& cost, int cores) {
  const int p = static_cast<int>(schedule.programs.size());
  Replay out;
  out.times.resize(p);
  out.rank_end.assign(p, 0.0);
  std::vector<size_t> pos(p, 0);
  std::vector<double> now(p, 0.0);
  std::map<std::string, double> arrival;  // posted messages not yet received
  // When each core is next free; empty: a core per rank, never waited for.
  std::multiset<double> core_free;
  for (int c = 0; c < cores; ++c) core_free.insert(0.0);

  // When rank r's next action can start, or nothing if it waits for a
  // message not yet sent (or has no action left).
  auto ready_at = [&](int r) -> std::optional<double> {
    const auto& program = schedule.programs[r];
    if (pos[r] == program.size()) return std::nullopt;
    const Action& a = program[pos[r]];
    if (!is_recv(a.type)) return now[r];
    auto it = arrival.find(message_of(a));
    if (it == arrival.end()) return std::nullopt;
    return std::max(now[r], it->second);
  };

  for (;;) {
    int next = -1;
    double earliest = 0;
    for (int r = 0; r < p; ++r) {
      const std::optional<double> t = ready_at(r);
      if (t && (next < 0 || *t < earliest)) next = r, earliest = *t;
    }
    if (next < 0) break;
    const int r = next;
    const Action& a = schedule.programs[r][pos[r]];
    TimedAction t{now[r], earliest};
    if (is_recv(a.type)) {
      arrival.erase(message_of(a));
      now[r] = earliest;
    } else if (is_send(a.type)) {
      t.end = now[r] + cost(a);
      arrival[message_of(a)] = t.end;
    } else {
      t.begin = earliest;
      if (!core_free.empty()) {  // the first core to come free, or one free now
        const auto core = core_free.begin();
        t.begin = std::max(earliest, *core);
        core_free.erase(core);
      }
      t.end = t.begin + cost(a);
      if (cores > 0) core_free.insert(t.end);
      now[r] = t.end;
    }
    out.times[r].push_back(t);
    ++pos[r];
  }

  out.finished = true;
  for (int r = 0; r < p; ++r) {
    out.rank_end[r] = now[r];
    const auto& program = schedule.programs[r];
    if (pos[r] == program.size()) continue;
    const Action& a = program[pos[r]];
    out.finished = false;
    if (!out.deadlock.empty()) out.deadlock += "; ";
    out.deadlock += "rank " + std::to_string(r) + " waits at action " + std::to_string(pos[r]) + " (" +
                    to_string(a) + ") for message " + message_of(a);
  }
  return out;
}

}  // namespace distlab::pipeline
