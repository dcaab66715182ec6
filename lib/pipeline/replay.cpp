#include "pipeline/replay.hpp"

#include <algorithm>
#include <map>

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

Replay replay(const Schedule& schedule, const std::function<double(const Action&)>& cost) {
  const int p = static_cast<int>(schedule.programs.size());
  Replay out;
  out.times.resize(p);
  out.rank_end.assign(p, 0.0);
  std::vector<size_t> pos(p, 0);
  std::vector<double> now(p, 0.0);
  std::map<std::string, double> arrival;  // posted messages not yet received

  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      const auto& program = schedule.programs[r];
      while (pos[r] < program.size()) {
        const Action& a = program[pos[r]];
        TimedAction t{now[r], now[r]};
        if (is_recv(a.type)) {
          auto it = arrival.find(message_of(a));
          if (it == arrival.end()) break;  // blocked: the message is not sent yet
          t.end = std::max(now[r], it->second);
          arrival.erase(it);
          now[r] = t.end;
        } else if (is_send(a.type)) {
          t.end = now[r] + cost(a);
          arrival[message_of(a)] = t.end;
        } else {
          t.end = now[r] + cost(a);
          now[r] = t.end;
        }
        out.times[r].push_back(t);
        ++pos[r];
        moved = true;
      }
    }
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
