// Two readings of one trace must agree: the same events, or both refused.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::fuzz {

inline bool same_event(const trace::Event& a, const trace::Event& b) {
  return a.rank == b.rank && a.lane == b.lane && a.name == b.name && a.category == b.category &&
         a.begin_us == b.begin_us && a.end_us == b.end_us && a.bytes == b.bytes && a.peer == b.peer &&
         a.flow == b.flow && a.args == b.args;
}

// Aborts, saying how, unless both were refused or both read the same events
// (a refusal may come after some events were handed on: only its message
// counts, and only when `same_message` asks for it).
inline void check_same_events(const std::vector<trace::Event>& a, const std::string& a_error,
                              const std::vector<trace::Event>& b, const std::string& b_error, const char* what,
                              bool same_message = false) {
  if (!a_error.empty() && !b_error.empty() && (!same_message || a_error == b_error)) return;
  bool same = a_error.empty() == b_error.empty() && a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) same = same_event(a[i], b[i]);
  if (same) return;
  std::fprintf(stderr, "%s disagree: %zu events%s%s; %zu events%s%s\n", what, a.size(),
               a_error.empty() ? "" : ", refused: ", a_error.c_str(), b.size(), b_error.empty() ? "" : ", refused: ",
               b_error.c_str());
  std::abort();
}

}  // namespace distlab::fuzz
