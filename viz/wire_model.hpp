// The same-host transport's rings as the trace's counter samples say, for
// the Wire panel. No drawing in here.
//
// The contract (lib/comm/shm_links.cpp records these when tracing is on):
//
//   name   "shm ring S->D"  S and D are world ranks ("shm ring 0->1": the ring
//                           rank S writes to and rank D reads from), maybe
//                           followed by " (LABEL)": whose ring it is when one
//                           pair has several (the library writes its
//                           communicator's, "shm ring 0->1 (world d09c)")
//   series "head", "tail", "capacity"  bytes, decimal integers as text, as
//                           every counter's series are
//   rank   S on the samples the sender records (after each chunk or header
//          it writes), D on those the receiver records (after each chunk it
//          reads). Both sides' samples of one ring describe one ring, so
//          they are merged by time.
//
// `head` is the bytes written so far and `tail` the bytes read so far, both
// only ever growing; the ring holds `capacity` bytes, a byte's place in it
// is its count % capacity, and head - tail (0..capacity) are in flight:
// written, not yet read. Counters with other names are ignored; a ring
// counter that breaks the contract is skipped and counted, by why.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::viz {

inline constexpr const char* kWireCounterPrefix = "shm ring ";

// Which ring: the one rank `from` writes to and rank `to` reads from, of
// the communicator `label` names (empty: none named).
struct RingId {
  int from = 0, to = 0;
  std::string label;
  bool operator==(const RingId& o) const { return from == o.from && to == o.to && label == o.label; }
  bool operator!=(const RingId& o) const { return !(*this == o); }
  bool operator<(const RingId& o) const {
    if (from != o.from) return from < o.from;
    return to != o.to ? to < o.to : label < o.label;
  }
};

// "S->D" or "S->D (LABEL)" (spaces around the arrow allowed) -> the ring;
// nothing unless S and D are different non-negative integers and a label,
// if any, is in parentheses at the end.
std::optional<RingId> parse_ring_id(const std::string& text);
std::string ring_label(const RingId& id);  // "0->1", "0->1 (world d09c)"

// One sample of one ring, as recorded.
struct WireSample {
  int64_t head = 0, tail = 0, capacity = 1;
  int rank = 0;  // who recorded it: the ring's sender or its receiver
  int64_t at_us = 0;
};

// What to draw for one sample. Turns are fractions of the circle,
// clockwise from 12 o'clock.
struct WireView {
  int64_t occupied = 0;    // head - tail: in flight
  double fill = 0.0;       // occupied / capacity, 0..1: also the occupied arc's length in turns, so a full
                           // ring is the whole circle and an empty one nothing, though head and tail sit
                           // at one place in both
  int64_t tail_at = 0;     // tail % capacity: where the oldest unread byte is
  int64_t head_at = 0;     // head % capacity: where the next byte goes
  double tail_turn = 0.0;  // tail_at / capacity: the occupied arc starts here ...
  double head_turn = 0.0;  // head_at / capacity: ... and ends here
  int64_t moved = 0;       // tail: bytes through the ring so far (written and read back out)
};
// Only for a sample the model kept (capacity > 0, 0 <= tail <= head <= tail + capacity).
WireView wire_view(const WireSample& sample);

// Why a ring counter was skipped.
enum class WireFault {
  kBadName,        // "shm ring ..." but not "shm ring S->D" or "shm ring S->D (LABEL)"
  kMissingSeries,  // no head, tail or capacity
  kNotANumber,     // a series that is not a decimal integer
  kWrongRank,      // recorded on a rank that is neither S nor D
  kNegative,       // head or tail below 0
  kNoCapacity,     // capacity 0 or less
  kTailPastHead,   // read more than was written
  kOverfull,       // head - tail > capacity: more in flight than the ring holds
};
inline constexpr int kWireFaultCount = 8;
const char* to_string(WireFault fault);  // "missing series", "tail > head", ...

struct WireRing {
  RingId id;
  std::vector<WireSample> samples;  // by time; samples of one time in the order they came

  // The sample with the most bytes in flight (the first of equal ones).
  int fullest() const;
};

// The rings of a trace.
class WireModel {
 public:
  WireModel() = default;
  // Reads every ring counter of `events`; everything else is ignored.
  explicit WireModel(const std::vector<trace::Event>& events);

  bool empty() const { return rings_.empty(); }
  // By S, then D; rings of one pair by their first sample's time.
  const std::vector<WireRing>& rings() const { return rings_; }
  // The index in rings() of the ring from id.from to id.to with id.label;
  // with no label, the pair's busiest ring (the most bytes moved; the first
  // of equal ones); -1 when there is none.
  int find(const RingId& id) const;
  // The earliest sample of any ring: time 0 for the panel.
  int64_t origin_us() const { return origin_us_; }

  int64_t skipped() const;  // every fault together
  int64_t skipped(WireFault fault) const { return skipped_[static_cast<size_t>(fault)]; }
  // "3 samples skipped: 2 tail > head, 1 missing series"; empty when none were.
  std::string skipped_text() const;

 private:
  std::vector<WireRing> rings_;
  std::array<int64_t, kWireFaultCount> skipped_{};
  int64_t origin_us_ = 0;
};

}  // namespace distlab::viz
