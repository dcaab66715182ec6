#include "trace_model.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace distlab::viz {
namespace {

// A row's stacking levels while its events are placed in begin order: the
// end of the event each level holds last, in a tree of minima over them,
// so that the lowest level free at a time (its event ended by then) is
// found in O(log levels).
class LevelEnds {
 public:
  // The lowest level free at `begin_us` (a new one when none is), now held
  // until `end_us`.
  uint32_t place(int64_t begin_us, int64_t end_us) {
    if (levels_ == 0 || min_[1] > begin_us) {
      if (levels_ == leaves_) grow();
      set(levels_, end_us);
      return static_cast<uint32_t>(levels_++);
    }
    size_t node = 1;
    while (node < leaves_) node = min_[2 * node] <= begin_us ? 2 * node : 2 * node + 1;
    set(node - leaves_, end_us);
    return static_cast<uint32_t>(node - leaves_);
  }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();  // a leaf no level uses yet
  // min_[1] is the root, node n's children are 2n and 2n + 1, leaf l is min_[leaves_ + l].
  std::vector<int64_t> min_{kNever, kNever};
  size_t leaves_ = 1;
  size_t levels_ = 0;

  void set(size_t level, int64_t end_us) {
    size_t node = leaves_ + level;
    min_[node] = end_us;
    for (node /= 2; node >= 1; node /= 2) min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }
  void grow() {
    std::vector<int64_t> wider(4 * leaves_, kNever);
    std::copy(min_.begin() + static_cast<std::ptrdiff_t>(leaves_), min_.end(),
              wider.begin() + static_cast<std::ptrdiff_t>(2 * leaves_));
    leaves_ *= 2;
    min_ = std::move(wider);
    for (size_t node = leaves_ - 1; node >= 1; --node) min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }
};

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

}  // namespace

uint32_t StringPool::intern(const std::string& text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(strings_.size());
  strings_.push_back(text);
  ids_.emplace(text, id);
  return id;
}

uint32_t StringPool::find(const std::string& text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? kAbsent : it->second;
}

bool lane_before(const std::string& a, const std::string& b) {
  auto rank_of = [](const std::string& lane) {
    if (lane == trace::kLaneCompute) return 0;
    if (lane == trace::kLaneComm) return 1;
    return 2;
  };
  const int ra = rank_of(a);
  const int rb = rank_of(b);
  return ra != rb ? ra < rb : a < b;
}

uint32_t TraceModel::row_for(int rank, const std::string& lane) {
  auto [it, added] = row_index_.try_emplace({rank, lane}, static_cast<uint32_t>(rows_.size()));
  if (added) {
    // New rows go at the end for now; finalize() puts them in order. (Sorting
    // here would renumber every event once per new row: a file with many
    // ranks would take quadratic time.)
    TraceRowData row;
    row.rank = rank;
    row.lane = lane;
    rows_.push_back(std::move(row));
    rows_sorted_ = false;
  }
  return it->second;
}

void TraceModel::sort_rows() {
  std::vector<uint32_t> order(rows_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
    const TraceRowData& x = rows_[a];
    const TraceRowData& y = rows_[b];
    return x.rank != y.rank ? x.rank < y.rank : lane_before(x.lane, y.lane);
  });
  std::vector<uint32_t> new_index(rows_.size());
  std::vector<TraceRowData> sorted;
  sorted.reserve(rows_.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    new_index[order[i]] = i;
    sorted.push_back(std::move(rows_[order[i]]));
  }
  rows_ = std::move(sorted);
  for (EventRecord& r : records_) r.row = new_index[r.row];
  for (auto& [key, index] : row_index_) index = new_index[index];
  rows_sorted_ = true;
  flows_dirty_ = true;
  cached_lane_ = nullptr;  // the rows moved
}

void TraceModel::add(const std::vector<trace::Event>& events) {
  records_.reserve(records_.size() + events.size());
  for (const trace::Event& e : events) add(e);
}

void TraceModel::reserve(size_t events) {
  records_.reserve(records_.size() + events);
  // A flow id is shared by a send and its recv: at most one id per two
  // events (4 in 10 in the synthetic trace), so the table never moves while
  // a file of paired sends and recvs is read.
  flow_ends_.reserve(flow_ends_.size() + events / 2);
}

void TraceModel::add(const trace::Event& e) {
  // A counter sample is a value at an instant, not an interval: the rows
  // draw boxes, so it has no place in them.
  if (e.is_counter()) {
    add_counter(e);
    return;
  }
  if (cached_lane_ == nullptr || e.rank != cached_rank_ || e.lane != *cached_lane_ || cached_row_ >= rows_.size()) {
    cached_row_ = row_for(e.rank, e.lane);
    cached_rank_ = e.rank;
    cached_lane_ = &rows_[cached_row_].lane;
  }
  EventRecord r;
  r.begin_us = std::clamp(e.begin_us, -kMaxAbsTimeUs, kMaxAbsTimeUs);
  // A negative duration (a corrupt or hand-written file) is shown as an instant.
  r.end_us = std::clamp(e.end_us, r.begin_us, kMaxAbsTimeUs);
  r.bytes = e.bytes;
  r.flow = e.flow;
  r.rank = e.rank;
  r.peer = e.peer;
  r.name = intern_at(0, e.name);
  r.category = intern_at(1, e.category);
  arg_ids_.clear();
  for (size_t a = 0; a < e.args.size(); ++a) {
    const auto& [key, value] = e.args[a];
    if (a < kCachedArgs)
      arg_ids_.emplace_back(intern_at(2 + 2 * a, key), intern_at(3 + 2 * a, value));
    else
      arg_ids_.emplace_back(strings_.intern(key), strings_.intern(value));
  }
  r.args_begin = share_args(rows_[cached_row_]);
  r.args_count = static_cast<uint32_t>(arg_ids_.size());
  r.row = cached_row_;
  const auto index = static_cast<uint32_t>(records_.size());
  extend_span(r.begin_us, r.end_us);
  records_.push_back(r);
  rows_[cached_row_].events.push_back(index);
  rows_[cached_row_].dirty = true;
  // Sends and recvs enter the flow table in index_flows() (finalize() calls it).
  if (r.flow != 0) flows_dirty_ = true;
}

void TraceModel::index_flows() {
  // In the order added, as add() did one at a time: a later send (recv)
  // with the same id replaces the earlier one. Here the table's slot of the
  // event kAhead further on is fetched early, so the cache misses of a
  // table of millions of random ids overlap instead of coming one by one
  // (in add() they were 8 % of opening the 1 M-event trace).
  const uint32_t send = strings_.find("send");
  const uint32_t recv = strings_.find("recv");
  constexpr size_t kAhead = 16;
  const size_t n = records_.size();
  for (size_t i = flows_indexed_; i < n; ++i) {
    if (i + kAhead < n && records_[i + kAhead].flow != 0) flow_ends_.prefetch(records_[i + kAhead].flow);
    const EventRecord& r = records_[i];
    if (r.flow == 0 || (r.category != send && r.category != recv)) continue;
    FlowTable::Entry& ends = flow_ends_.at(r.flow);
    (r.category == send ? ends.send : ends.recv) = static_cast<uint32_t>(i);
  }
  flows_indexed_ = n;
}

void TraceModel::add_counter(const trace::Event& e) {
  CounterRecord c;
  c.at_us = std::clamp(e.begin_us, -kMaxAbsTimeUs, kMaxAbsTimeUs);
  c.rank = e.rank;
  c.name = strings_.intern(e.name);
  c.series_begin = static_cast<uint32_t>(counter_series_.size());
  c.series_count = static_cast<uint32_t>(e.args.size());
  for (const auto& [series, value] : e.args) counter_series_.emplace_back(strings_.intern(series), strings_.intern(value));
  extend_span(c.at_us, c.at_us);
  counters_.push_back(c);
}

trace::Event TraceModel::counter_event(size_t i) const {
  const CounterRecord& c = counters_[i];
  trace::Event e;
  e.rank = c.rank;
  e.lane = trace::kLaneCounter;
  e.category = trace::kCounterCategory;
  e.name = text(c.name);
  e.begin_us = e.end_us = c.at_us;
  for (uint32_t s = 0; s < c.series_count; ++s) {
    const auto& [series, value] = counter_series_[c.series_begin + s];
    e.args.emplace_back(text(series), text(value));
  }
  return e;
}

void TraceModel::extend_span(int64_t begin_us, int64_t end_us) {
  if (!has_span_) {
    origin_us_ = begin_us;
    end_us_ = end_us;
    has_span_ = true;
  }
  origin_us_ = std::min(origin_us_, begin_us);
  end_us_ = std::max(end_us_, end_us);
}

void TraceModel::recompute_span() {
  has_span_ = false;
  origin_us_ = end_us_ = 0;
  for (const EventRecord& r : records_) extend_span(r.begin_us, r.end_us);
  for (const CounterRecord& c : counters_) extend_span(c.at_us, c.at_us);
}

uint32_t TraceModel::intern_at(size_t slot, const std::string& text) {
  uint32_t& id = last_ids_[slot];
  if (id < strings_.size() && strings_.at(id) == text) return id;
  return id = strings_.intern(text);
}

uint32_t TraceModel::share_args(TraceRowData& row) {
  // The row's previous event had the same args (a forward and its backward,
  // a send and its recv): point at its copy. Compared, not trusted: after a
  // rollback the range may hold other pairs or be gone.
  const size_t n = arg_ids_.size();
  if (n == 0) return 0;
  if (row.last_args_count == n && size_t{row.last_args_begin} + n <= args_.size() &&
      std::equal(arg_ids_.begin(), arg_ids_.end(), args_.begin() + row.last_args_begin))
    return row.last_args_begin;
  row.last_args_begin = static_cast<uint32_t>(args_.size());
  row.last_args_count = static_cast<uint32_t>(n);
  args_.insert(args_.end(), arg_ids_.begin(), arg_ids_.end());
  return row.last_args_begin;
}

void TraceModel::rollback(const Checkpoint& mark) {
  if (mark.records >= records_.size() && mark.rows >= rows_.size() && mark.counters >= counters_.size()) return;
  counters_.resize(std::min(mark.counters, counters_.size()));
  counter_series_.resize(std::min(mark.counter_series, counter_series_.size()));
  for (TraceRowData& row : rows_) {
    // Anywhere in the row, not only at its end: a finalize() since the mark
    // sorted them in among the older ones.
    row.events.erase(std::remove_if(row.events.begin(), row.events.end(),
                                    [&](uint32_t index) { return index >= mark.records; }),
                     row.events.end());
    row.dirty = true;
  }
  records_.resize(mark.records);
  // Rebuilt at the next finalize(), not patched: a later event with the
  // same flow id replaced an earlier one's entry, which only the records
  // still know.
  flow_ends_.clear();
  flows_indexed_ = 0;
  args_.resize(mark.args);
  if (rows_.size() > mark.rows) {
    // Rows first seen since the mark are still at the end (finalize() has
    // not sorted them in).
    rows_.resize(mark.rows);
    for (auto it = row_index_.begin(); it != row_index_.end();)
      it = it->second >= mark.rows ? row_index_.erase(it) : std::next(it);
  }
  cached_lane_ = nullptr;
  recompute_span();
  flows_dirty_ = true;
}

void TraceModel::shift_rank(const Checkpoint& mark, int rank, int64_t offset_us) {
  // Every time held is within +-kMaxAbsTimeUs, so an offset clamped to twice
  // that cannot overflow the sum, and still moves any time to either end.
  offset_us = std::clamp(offset_us, -2 * kMaxAbsTimeUs, 2 * kMaxAbsTimeUs);
  for (size_t i = mark.records; i < records_.size(); ++i) {
    EventRecord& r = records_[i];
    if (r.rank != rank) continue;
    r.begin_us = std::clamp(r.begin_us + offset_us, -kMaxAbsTimeUs, kMaxAbsTimeUs);
    r.end_us = std::clamp(r.end_us + offset_us, r.begin_us, kMaxAbsTimeUs);
    rows_[r.row].dirty = true;
  }
  for (size_t i = mark.counters; i < counters_.size(); ++i)
    if (counters_[i].rank == rank)
      counters_[i].at_us = std::clamp(counters_[i].at_us + offset_us, -kMaxAbsTimeUs, kMaxAbsTimeUs);
  recompute_span();
  flows_dirty_ = true;
}

void TraceModel::clear() { *this = TraceModel(); }

trace::Event TraceModel::event(uint32_t i) const {
  const EventRecord& r = records_[i];
  trace::Event e;
  e.rank = r.rank;
  e.lane = rows_[r.row].lane;
  e.name = text(r.name);
  e.category = text(r.category);
  e.begin_us = r.begin_us;
  e.end_us = r.end_us;
  e.bytes = r.bytes;
  e.peer = r.peer;
  e.flow = r.flow;
  for (uint32_t a = 0; a < r.args_count; ++a) {
    const auto& [key, value] = args_[r.args_begin + a];
    e.args.emplace_back(text(key), text(value));
  }
  return e;
}

std::optional<uint32_t> TraceModel::partner(uint32_t event) const {
  const EventRecord& r = records_[event];
  if (r.flow == 0) return std::nullopt;
  const FlowTable::Entry* ends = flow_ends_.find(r.flow);
  if (ends == nullptr || ends->send == FlowTable::kNone || ends->recv == FlowTable::kNone) return std::nullopt;
  if (ends->send == event) return ends->recv;
  if (ends->recv == event) return ends->send;
  return std::nullopt;
}

void TraceModel::rebuild_row(TraceRowData& row) {
  // What this needs of each event, copied side by side in one pass over the
  // records in the order added; sorting, stacking and filling the tracks
  // then read the copies in order instead of reaching into the records
  // (64 bytes each, 64 MB for a million events) once per pass.
  struct Keyed {
    int64_t begin_us;
    int64_t end_us;
    int64_t bytes;
    uint32_t index;
    uint32_t level;
  };
  // Begin order; an enclosing event before the ones it contains.
  auto less = [](const Keyed& x, const Keyed& y) {
    if (x.begin_us != y.begin_us) return x.begin_us < y.begin_us;
    if (x.end_us != y.end_us) return x.end_us > y.end_us;
    return x.index < y.index;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(row.events.size());
  // A file's rows usually arrive in order; a comm row nearly (its
  // collectives are written after their sends and recvs): the events out of
  // order go aside, are sorted, and are merged back in one pass.
  std::vector<Keyed> aside;
  for (uint32_t index : row.events) {
    const EventRecord& r = records_[index];
    const Keyed k{r.begin_us, r.end_us, r.bytes, index, 0};
    if (keyed.empty() || !less(k, keyed.back()))
      keyed.push_back(k);
    else
      aside.push_back(k);
  }
  if (!aside.empty()) {
    std::sort(aside.begin(), aside.end(), less);
    std::vector<Keyed> merged(keyed.size() + aside.size());
    std::merge(keyed.begin(), keyed.end(), aside.begin(), aside.end(), merged.begin(), less);
    keyed = std::move(merged);
    aside = {};
  }

  // Stacking: each event takes the lowest level that is free at its begin,
  // so nested spans draw under their parent and each level never overlaps.
  // Levels are chosen first and the tracks filled after, each reserved to
  // its size: pushing onto them one by one left up to twice the memory.
  LevelEnds level_ends;
  std::vector<size_t> level_sizes;
  LaneStats s;
  s.min_us = std::numeric_limits<int64_t>::max();
  int64_t union_end = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < keyed.size(); ++i) {
    Keyed& k = keyed[i];
    const uint32_t level = level_ends.place(k.begin_us, k.end_us);
    if (level == level_sizes.size()) level_sizes.push_back(0);
    k.level = level;
    records_[k.index].level = level;
    row.events[i] = k.index;
    ++level_sizes[level];

    const int64_t d = k.end_us - k.begin_us;
    if (s.count == 0) {
      s.first_us = k.begin_us;
      s.last_us = k.end_us;
    }
    ++s.count;
    s.total_us = saturating_add(s.total_us, d);
    s.min_us = std::min(s.min_us, d);
    s.max_us = std::max(s.max_us, d);
    s.bytes = saturating_add(s.bytes, k.bytes);
    s.last_us = std::max(s.last_us, k.end_us);
    // Union of intervals, swept in begin order.
    if (k.begin_us >= union_end) {
      s.busy_us = saturating_add(s.busy_us, d);
      union_end = k.end_us;
    } else if (k.end_us > union_end) {
      s.busy_us = saturating_add(s.busy_us, k.end_us - union_end);
      union_end = k.end_us;
    }
  }
  row.levels.clear();
  row.levels.resize(level_sizes.size());
  for (size_t l = 0; l < level_sizes.size(); ++l) {
    row.levels[l].begin_us.reserve(level_sizes[l]);
    row.levels[l].end_us.reserve(level_sizes[l]);
    row.levels[l].events.reserve(level_sizes[l]);
  }
  for (const Keyed& k : keyed) {
    Track& t = row.levels[k.level];
    t.begin_us.push_back(k.begin_us);
    t.end_us.push_back(k.end_us);
    t.events.push_back(k.index);
  }
  for (Track& t : row.levels) t.index_blocks();
  if (s.count == 0) s.min_us = 0;
  row.stats = s;
  row.dirty = false;
}

void Track::index_blocks() {
  const size_t n = begin_us.size();
  block_max_us.assign((n + kBlock - 1) / kBlock, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t gap = i == 0 ? 0 : begin_us[i] - end_us[i - 1];
    int64_t& m = block_max_us[i / kBlock];
    m = std::max({m, end_us[i] - begin_us[i], gap});
  }
}

void TraceModel::rebuild_flows() {
  // The sends in the order added, each looked up in the table: the records
  // are read in order and only the recv at random, where walking the table
  // in hash order reached into the records at random for both ends. Links
  // come out nearly in time order, as a file's events are.
  struct Found {
    std::pair<uint32_t, uint32_t> rows;
    FlowLink link;
  };
  std::vector<Found> found;
  found.reserve(flow_ends_.size());
  flow_count_ = 0;
  clamped_flows_ = 0;
  constexpr size_t kAhead = 16;  // as in index_flows
  for (size_t i = 0; i < records_.size(); ++i) {
    if (i + kAhead < records_.size() && records_[i + kAhead].flow != 0)
      flow_ends_.prefetch(records_[i + kAhead].flow);
    const EventRecord& r = records_[i];
    if (r.flow == 0) continue;
    const FlowTable::Entry* ends = flow_ends_.find(r.flow);
    // The send the table kept for this id (a later send with the same id
    // replaces an earlier one), and a recv.
    if (ends == nullptr || ends->send != i || ends->recv == FlowTable::kNone) continue;
    const EventRecord& recv = records_[ends->recv];
    found.push_back(Found{{r.row, recv.row}, FlowLink{ends->send, ends->recv}});
    ++flow_count_;
    if (recv.end_us < r.begin_us) ++clamped_flows_;
  }
  // Each pair of rows' arrows counted, then put in vectors of exactly that
  // size (growing them one by one kept up to twice the memory at the moment
  // the model is largest).
  std::map<std::pair<uint32_t, uint32_t>, size_t> counts;
  {
    std::pair<uint32_t, uint32_t> last_key{};
    size_t* last = nullptr;
    for (const Found& f : found) {
      if (last == nullptr || f.rows != last_key) {
        last = &counts[f.rows];
        last_key = f.rows;
      }
      ++*last;
    }
  }
  bundles_.clear();
  bundles_.resize(counts.size());
  std::map<std::pair<uint32_t, uint32_t>, FlowBundle*> bundle_of;
  {
    size_t b = 0;
    for (const auto& [rows, count] : counts) {
      FlowBundle& bundle = bundles_[b++];
      bundle.from_row = rows.first;
      bundle.to_row = rows.second;
      bundle.links.reserve(count);
      bundle_of.emplace(rows, &bundle);
    }
  }
  {
    std::pair<uint32_t, uint32_t> last_key{};
    FlowBundle* last = nullptr;
    for (const Found& f : found) {
      if (last == nullptr || f.rows != last_key) {
        last = bundle_of.at(f.rows);
        last_key = f.rows;
      }
      last->links.push_back(f.link);
    }
  }
  found = {};
  for (FlowBundle& b : bundles_) {
    // Sorted by (left end, send) on keys copied next to each other: the
    // comparison no longer reaches into the records at random.
    struct Keyed {
      int64_t left;
      FlowLink link;
    };
    std::vector<Keyed> keyed;
    keyed.reserve(b.links.size());
    for (const FlowLink& l : b.links) keyed.push_back(Keyed{records_[l.send].begin_us, l});
    std::sort(keyed.begin(), keyed.end(), [](const Keyed& x, const Keyed& y) {
      return x.left != y.left ? x.left < y.left : x.link.send < y.link.send;
    });
    b.left_us.reserve(keyed.size());
    b.right_us.reserve(keyed.size());
    b.right_max_us.reserve(keyed.size());
    int64_t running = std::numeric_limits<int64_t>::min();
    b.widest_end_us = 0;
    for (size_t i = 0; i < keyed.size(); ++i) {
      const FlowLink& l = keyed[i].link;
      b.links[i] = l;
      const EventRecord& send = records_[l.send];
      const EventRecord& recv = records_[l.recv];
      b.widest_end_us = std::max({b.widest_end_us, send.end_us - send.begin_us, recv.end_us - recv.begin_us});
      const int64_t right = arrival_us(l);
      running = std::max(running, right);
      b.left_us.push_back(keyed[i].left);
      b.right_us.push_back(right);
      b.right_max_us.push_back(running);
    }
  }
  flows_dirty_ = false;
}

void TraceModel::finalize() {
  if (flows_indexed_ < records_.size()) index_flows();
  if (!rows_sorted_) sort_rows();
  for (TraceRowData& row : rows_)
    if (row.dirty) {
      rebuild_row(row);
      flows_dirty_ = true;
    }
  if (flows_dirty_) rebuild_flows();
}

}  // namespace distlab::viz
