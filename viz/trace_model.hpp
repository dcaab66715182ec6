// Trace data, kept apart from drawing: events grouped into rows (one per rank
// and lane), sorted and stacked so a frame can find what is visible by
// binary search instead of walking a million events.
//
// Events are stored compactly (strings interned, a row's repeated args
// stored once, 64 bytes a record; about 120 bytes an event in all with the
// rows' tracks, the flow table and the arrows) and
// never re-read after finalize(): the live feed appends with add() and the
// panel calls finalize() to rebuild only the rows that changed.
//
// Counter samples (a rank's memory at an instant) are values, not intervals:
// they are kept in a store of their own, in the order added, and never enter
// the rows, their levels or their statistics. They do count for the span of
// time shown (origin_us, end_us).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flow_table.hpp"
#include "trace/event.hpp"

namespace distlab::viz {

class StringPool {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;
  uint32_t intern(const std::string& text);
  // The id of `text`, kAbsent when it was never interned.
  uint32_t find(const std::string& text) const;
  const std::string& at(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> ids_;
};

struct EventRecord {
  int64_t begin_us = 0;
  int64_t end_us = 0;
  int64_t bytes = 0;
  uint64_t flow = 0;
  int32_t rank = 0;
  int32_t peer = -1;
  uint32_t name = 0;      // StringPool ids
  uint32_t category = 0;
  // Into the model's argument list; events of a row with the same args one
  // after the other share one copy.
  uint32_t args_begin = 0;
  uint32_t args_count = 0;
  uint32_t row = 0;
  uint32_t level = 0;  // stacking level inside the row (nested or overlapping events)
};

// One stacking level of a row: events that do not overlap, in begin order.
// Hence ends are in order too and both columns can be binary-searched.
struct Track {
  std::vector<int64_t> begin_us;
  std::vector<int64_t> end_us;
  std::vector<uint32_t> events;
  // For each run of kBlock events (0..63, 64..127, ...): the largest of their
  // durations and of the gaps before them (begin - the previous event's end).
  // Zoomed out, a frame steps over whole runs that merge into one box with
  // one look each instead of a binary search per 2 pixels (trace_layout.cpp).
  // index_blocks() fills it; empty (a Track built by hand), it is not used.
  static constexpr size_t kBlock = 64;
  std::vector<int64_t> block_max_us;
  void index_blocks();
};

struct LaneStats {
  int64_t count = 0;
  int64_t busy_us = 0;   // union of the events' intervals
  int64_t total_us = 0;  // sum of durations (more than busy_us when events nest)
  int64_t min_us = 0;
  int64_t max_us = 0;
  int64_t bytes = 0;
  int64_t first_us = 0;  // earliest begin
  int64_t last_us = 0;   // latest end
};

struct TraceRowData {
  int rank = 0;
  std::string lane;
  std::vector<uint32_t> events;  // every event of the row, any order until finalize()
  std::vector<Track> levels;
  LaneStats stats;
  bool dirty = true;
  // The args of the row's latest event that has some (TraceModel::add
  // shares them with the next event when equal).
  uint32_t last_args_begin = 0;
  uint32_t last_args_count = 0;
};

// One counter sample (trace::Event::is_counter()): its series are
// (name, value) string ids in the model's counter series list.
struct CounterRecord {
  int64_t at_us = 0;
  int32_t rank = 0;
  uint32_t name = 0;  // StringPool id
  uint32_t series_begin = 0;
  uint32_t series_count = 0;
};

// A send and the recv that matched it: an arrow from the send's begin to
// the recv's end (TraceModel::arrival_us).
struct FlowLink {
  uint32_t send = 0;
  uint32_t recv = 0;
};

// All arrows from one row to another, ordered by their left end (the
// earlier of the two times) with a running maximum of their right end, so
// the arrows crossing a time window are found by binary search.
struct FlowBundle {
  uint32_t from_row = 0;
  uint32_t to_row = 0;
  std::vector<FlowLink> links;
  std::vector<int64_t> left_us;
  std::vector<int64_t> right_us;
  std::vector<int64_t> right_max_us;
  // The longest send or recv of the bundle (us): zoomed out so far that it is
  // under kMergePx, no arrow of the bundle is drawn and none is looked at.
  // The largest value when not known (a bundle built by hand).
  int64_t widest_end_us = INT64_MAX;
};

class TraceModel {
 public:
  // Appends events; rows are rebuilt at the next finalize(). Counter samples
  // (trace::Event::is_counter()) go to the counter store instead: rows hold
  // intervals only.
  void add(const std::vector<trace::Event>& events);
  void add(const trace::Event& event);
  // Room for `events` more (a file's size / 256 bytes: the sink writes about
  // 257 per event), so a large file is not copied while it grows.
  void reserve(size_t events);
  // What add() has appended so far, to undo a file that failed half-way
  // (the loader's recovery of a damaged file starts that file again).
  struct Checkpoint {
    size_t records = 0;
    size_t args = 0;
    size_t rows = 0;
    size_t counters = 0;
    size_t counter_series = 0;
  };
  Checkpoint checkpoint() const {
    return {records_.size(), args_.size(), rows_.size(), counters_.size(), counter_series_.size()};
  }
  void rollback(const Checkpoint& mark);
  // Moves rank's events and counter samples added since `mark` by offset_us
  // (a clock offset to rank 0, from the file's metadata). Before finalize().
  void shift_rank(const Checkpoint& mark, int rank, int64_t offset_us);
  // Sorts and stacks the rows that changed, pairs flows, updates statistics.
  void finalize();
  // The part of finalize() that needs only the events added so far: their
  // sends and recvs enter the flow table. A reader that adds a file in
  // pieces calls it after each, so that less is left for finalize() once
  // the last piece is in.
  void index_flows();
  void clear();

  // Interval events; counter samples are counted apart (counter_count()).
  size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }
  const EventRecord& record(uint32_t i) const { return records_[i]; }
  const std::string& text(uint32_t id) const { return strings_.at(id); }
  // The event as it was added (for tooltips and round-trip tests).
  trace::Event event(uint32_t i) const;
  // (key, value) pairs held for all events' args (a row's events with equal
  // args one after the other share them): what the args cost.
  size_t arg_pairs_stored() const { return args_.size(); }
  // Counter samples in the order added.
  size_t counter_count() const { return counters_.size(); }
  const CounterRecord& counter(size_t i) const { return counters_[i]; }
  // The sample as it was added (series as text, in their order then).
  trace::Event counter_event(size_t i) const;
  // Rows by rank, then lane: compute, comm, then the others by name (rows
  // first seen since the last finalize() are at the end until then).
  const std::vector<TraceRowData>& rows() const { return rows_; }
  // The earliest begin: time 0 of the display.
  int64_t origin_us() const { return origin_us_; }
  int64_t end_us() const { return end_us_; }
  double seconds_of(int64_t us) const { return (static_cast<double>(us) - static_cast<double>(origin_us_)) * 1e-6; }
  const std::vector<FlowBundle>& flow_bundles() const { return bundles_; }
  // The other end of the event's send->recv pair, when both arrived.
  std::optional<uint32_t> partner(uint32_t event) const;
  size_t flow_count() const { return flow_count_; }
  // Where an arrow ends: when the data arrived (the recv's end), never
  // before it left (the send's begin) even if the two clocks disagree.
  int64_t arrival_us(const FlowLink& link) const {
    return std::max(records_[link.recv].end_us, records_[link.send].begin_us);
  }
  // Arrows whose recv ended before its send began (clocks not aligned).
  size_t clamped_flow_count() const { return clamped_flows_; }

 private:
  uint32_t row_for(int rank, const std::string& lane);
  void sort_rows();
  void rebuild_row(TraceRowData& row);
  void rebuild_flows();
  void add_counter(const trace::Event& event);
  void extend_span(int64_t begin_us, int64_t end_us);
  void recompute_span();

  StringPool strings_;
  std::vector<EventRecord> records_;
  std::vector<std::pair<uint32_t, uint32_t>> args_;  // (key, value) string ids, shared (share_args)
  std::vector<CounterRecord> counters_;
  std::vector<std::pair<uint32_t, uint32_t>> counter_series_;  // (series, value) string ids
  std::vector<TraceRowData> rows_;
  std::map<std::pair<int, std::string>, uint32_t> row_index_;  // (rank, lane) -> index in rows_
  bool rows_sorted_ = true;
  FlowTable flow_ends_;  // id -> (send, recv) of records_[0, flows_indexed_)
  size_t flows_indexed_ = 0;
  std::vector<FlowBundle> bundles_;
  size_t flow_count_ = 0;
  size_t clamped_flows_ = 0;
  bool flows_dirty_ = false;
  // add()'s row of the previous event: a file's events come in runs of a row.
  uint32_t cached_row_ = 0;
  int cached_rank_ = 0;
  const std::string* cached_lane_ = nullptr;
  // The string ids add() used last for the name, the category and the first
  // args' keys and values: in a file they repeat from one event to the next,
  // and comparing with the last one is cheaper than hashing.
  static constexpr size_t kCachedArgs = 4;
  uint32_t last_ids_[2 + 2 * kCachedArgs] = {};
  uint32_t intern_at(size_t slot, const std::string& text);
  // arg_ids_ (the event being added) stored, or the row's previous copy.
  uint32_t share_args(TraceRowData& row);
  std::vector<std::pair<uint32_t, uint32_t>> arg_ids_;  // scratch
  int64_t origin_us_ = 0;
  int64_t end_us_ = 0;
  bool has_span_ = false;  // an event or a counter sample set origin_us_ and end_us_
};

// Times are clamped to +-2^52 us (142 years) when added, so durations and
// their sums cannot overflow whatever a file says.
inline constexpr int64_t kMaxAbsTimeUs = int64_t{1} << 52;

// Order of lanes inside a rank: compute, comm, then by name.
bool lane_before(const std::string& a, const std::string& b);

}  // namespace distlab::viz
