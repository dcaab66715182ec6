// Which message tags the collectives use, so that two collectives in flight
// at once (DDP's buckets, say) never take each other's messages.
//
//   tags [0, 2^20)            free for the user's own send/recv
//   2^20 - 2                  a lesson's --step: rank 0 lets the others go on
//                             (comm::wait_for_rank, lessons/common/lesson.hpp)
//   2^20 - 1                  calibrate()'s ping-pong
//   2^20 + t * 4096 + s       step s of a collective called with tag t
//   2^20 + t * 4096 + 4095    the check of that call, where the backend
//                             checks no piece of it (executor.cpp)
//
// A plan has at most 2 (1024 - 1) < 4096 steps, so the steps of one call
// never reach the next tag's range. Collectives that may run at the same
// time must be given different tags (0 <= t < kMaxCollectiveTag); calls in
// sequence can share one, since messages between two ranks with one tag
// arrive in the order they were sent. Within a call each step has its own
// tag, so a timeout names the step it stopped at.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace distlab::collectives {

inline constexpr int kCollectiveTagBase = 1 << 20;
inline constexpr int kTagStride = 1 << 12;
inline constexpr int kMaxCollectiveTag = (0x7fffffff - kCollectiveTagBase) / kTagStride;  // 524031
inline constexpr int kCalibrationTag = kCollectiveTagBase - 1;
inline constexpr int kLessonStepTag = kCollectiveTagBase - 2;

inline void check_collective_tag(int tag) {
  if (tag < 0 || tag >= kMaxCollectiveTag)
    throw std::invalid_argument("collective tag " + std::to_string(tag) + " is outside [0, " +
                                std::to_string(kMaxCollectiveTag) + ")");
}

// The message tag of step `step` of a collective called with `tag`.
inline int step_tag(int tag, size_t step) { return kCollectiveTagBase + tag * kTagStride + static_cast<int>(step); }

// The message tag of the check of a call made with `tag`: the last of its
// range, which no step reaches.
inline int call_check_tag(int tag) { return kCollectiveTagBase + tag * kTagStride + kTagStride - 1; }

}  // namespace distlab::collectives
