// How the calibration times what it measures (calibrate.cpp, pieces.cpp):
// seconds on the steady clock, and the median of a few timed runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace distlab::planner {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The middle one of `times` (the upper middle for an even count); not empty.
inline double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace distlab::planner
