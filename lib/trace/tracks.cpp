#include "trace/tracks.hpp"

#include <algorithm>

namespace distlab::trace {

bool nest_or_apart(int64_t a_begin, int64_t a_end, int64_t b_begin, int64_t b_end) {
  const bool apart = a_end <= b_begin || b_end <= a_begin;
  const bool a_in_b = b_begin <= a_begin && a_end <= b_end;
  const bool b_in_a = a_begin <= b_begin && b_end <= a_end;
  return apart || a_in_b || b_in_a;
}

std::string track_name(const std::string& lane, int level) {
  return level == 0 ? lane : lane + " (concurrent " + std::to_string(level) + ")";
}

bool TrackLevels::fits(const Level& level, const Placed& event) {
  // Whether `inner` (nested in `outer`) covers the time of outer's arrow.
  const auto covers_arrow = [](const Placed& outer, const Placed& inner) {
    return outer.anchor_us && inner.begin_us <= *outer.anchor_us && *outer.anchor_us <= inner.end_us;
  };
  // Events that ended by the new one's begin are apart: walk back from the
  // latest end to the first of those.
  for (auto it = level.rbegin(); it != level.rend() && it->end_us > event.begin_us; ++it) {
    const Placed& other = *it;
    if (!nest_or_apart(other.begin_us, other.end_us, event.begin_us, event.end_us)) return false;
    const bool apart = other.end_us <= event.begin_us || event.end_us <= other.begin_us;
    if (apart) continue;
    const bool other_inside = event.begin_us <= other.begin_us && other.end_us <= event.end_us;
    const bool event_inside = other.begin_us <= event.begin_us && event.end_us <= other.end_us;
    if ((other_inside && covers_arrow(event, other)) || (event_inside && covers_arrow(other, event))) return false;
  }
  return true;
}

int TrackLevels::place(int rank, const std::string& lane, int64_t begin_us, int64_t end_us,
                       std::optional<int64_t> anchor_us) {
  std::vector<Level>& levels = lanes_[{rank, lane}];
  const Placed event{end_us, begin_us, anchor_us};
  size_t k = 0;
  while (k < levels.size() && !fits(levels[k], event)) ++k;
  if (k == levels.size()) levels.emplace_back();
  Level& level = levels[k];
  const auto by_end = [](const Placed& a, const Placed& b) {
    return a.end_us != b.end_us ? a.end_us < b.end_us : a.begin_us < b.begin_us;
  };
  level.insert(std::upper_bound(level.begin(), level.end(), event, by_end), event);
  return static_cast<int>(k);
}

}  // namespace distlab::trace
