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

bool TrackLevels::fits(const Level& level, int64_t begin_us, int64_t end_us) {
  // Events that ended by begin_us are apart: walk back from the latest end
  // to the first of those.
  for (auto it = level.rbegin(); it != level.rend() && it->first > begin_us; ++it)
    if (!nest_or_apart(it->second, it->first, begin_us, end_us)) return false;
  return true;
}

int TrackLevels::place(int rank, const std::string& lane, int64_t begin_us, int64_t end_us) {
  std::vector<Level>& levels = lanes_[{rank, lane}];
  size_t k = 0;
  while (k < levels.size() && !fits(levels[k], begin_us, end_us)) ++k;
  if (k == levels.size()) levels.emplace_back();
  Level& level = levels[k];
  const std::pair<int64_t, int64_t> entry{end_us, begin_us};
  level.insert(std::upper_bound(level.begin(), level.end(), entry), entry);
  return static_cast<int>(k);
}

}  // namespace distlab::trace
