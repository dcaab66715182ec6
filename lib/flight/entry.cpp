#include "flight/entry.hpp"

#include <stdexcept>

namespace distlab::flight {

const char* to_string(State state) {
  switch (state) {
    case State::kEntered: return "entered";
    case State::kStarted: return "started";
    case State::kCompleted: return "completed";
    case State::kFailed: return "failed";
    case State::kTimedOut: return "timed_out";
  }
  return "?";
}

State state_from_string(const std::string& name) {
  for (State s : {State::kEntered, State::kStarted, State::kCompleted, State::kFailed, State::kTimedOut})
    if (name == to_string(s)) return s;
  throw std::invalid_argument("unknown state '" + name + "'");
}

std::string name_of(const Entry& e) {
  std::string text = e.op + " #" + std::to_string(e.seq);
  if (e.kind == "p2p")
    text += std::string(e.op == "send" ? " to" : " from") + " rank " + std::to_string(e.peer) + " (tag " +
            std::to_string(e.tag) + ")";
  return text;
}

std::string shape_text(const Entry& e) {
  std::string text = e.dtype + " [";
  for (size_t i = 0; i < e.shape.size(); ++i) text += (i ? ", " : "") + std::to_string(e.shape[i]);
  return text + "]";
}

}  // namespace distlab::flight
