// Which thread track of a Chrome-trace file an event goes on, so that
// Perfetto draws it right.
//
// The JSON trace format (and Perfetto, which reads it) accepts complete
// ("X") events on one thread track only when they nest perfectly: a parent
// and the children inside it, or events that do not overlap. Two that
// overlap partly are drawn wrong ("The Perfetto UI and trace processor do
// not support overlapping B/E/X events", Perfetto's FAQ). DistLab's lanes
// do overlap that way: a ring step's send starts inside its recv and ends
// after it, on two threads of one rank. So a lane is written as a stack of
// tracks: level 0 named as the lane ("comm"), and an event that would
// overlap an event of level k partly goes one level down ("comm
// (concurrent 1)", ...), where it nests or stays clear; so does an event
// whose arrow another event nested in it would catch. distlab-viz stacks
// a lane's events the same way on screen, and reads every level back into
// the one lane (each event carries its lane in args).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace distlab::trace {

// True when [a_begin, a_end] and [b_begin, b_end] can share a track: one
// inside the other (equal bounds included), or apart (touching ends count
// as apart).
bool nest_or_apart(int64_t a_begin, int64_t a_end, int64_t b_begin, int64_t b_end);

// The name of `lane`'s track at `level`: the lane itself at level 0.
std::string track_name(const std::string& lane, int level);

class TrackLevels {
 public:
  // The first level of (rank, lane) where [begin_us, end_us] nests or stays
  // apart from every event placed there before, and places it there. Any
  // order of events works; in order of their ends (how a recorder sees
  // them) a call looks only at the events inside the new one.
  //
  // `anchor_us`: where the event's arrow attaches (a send's begin, a recv's
  // arrival), if it has one. Perfetto binds an arrow to the innermost slice
  // around its time, so two events that nest where one's arrow time falls
  // inside the other nested in it (two sends begun in the same microsecond)
  // do not share a level: the arrow would land on the wrong send.
  int place(int rank, const std::string& lane, int64_t begin_us, int64_t end_us,
            std::optional<int64_t> anchor_us = std::nullopt);

 private:
  struct Placed {
    int64_t end_us = 0, begin_us = 0;
    std::optional<int64_t> anchor_us;
  };
  // One level's events in order of their ends.
  using Level = std::vector<Placed>;
  static bool fits(const Level& level, const Placed& event);
  std::map<std::pair<int, std::string>, std::vector<Level>> lanes_;
};

}  // namespace distlab::trace
