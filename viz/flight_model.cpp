// FlightModel (flight_model.hpp): reading the dumps as distlab-trace why
// reads them, diagnosing them with flight::diagnose, and placing the marker.
#include "flight_model.hpp"

#include <algorithm>
#include <cstdio>

namespace distlab::viz {
namespace {

void shift(flight::Dump& dump, int64_t offset_us) {
  auto move = [offset_us](int64_t& t) {
    if (t != 0) t += offset_us;  // 0 is "not yet"
  };
  move(dump.dumped_us);
  for (flight::Entry& e : dump.entries) {
    move(e.entered_us);
    move(e.started_us);
    move(e.ended_us);
  }
}

// The newest entry of `dump` that is the finding's operation as seen by a
// waiting rank.
std::optional<size_t> waiting_entry(const flight::Dump& dump, const flight::Finding& f) {
  const auto& entries = dump.entries;
  for (size_t i = entries.size(); i-- > 0;) {
    const flight::Entry& e = entries[i];
    if (!f.group.empty()) {
      if (e.kind == "collective" && e.group == f.group && e.seq == f.seq) return i;
    } else if (e.kind == "p2p" && e.op == f.op && e.seq == f.seq &&
               (f.culprits.empty() ||
                std::find(f.culprits.begin(), f.culprits.end(), e.peer) != f.culprits.end())) {
      return i;
    }
  }
  // A rank that waits for a dead one may wait in another operation than
  // the first waiting rank (the finding names that one's): its newest
  // unfinished operation, as why picks it.
  for (size_t i = entries.size(); i-- > 0;)
    if (entries[i].state != flight::State::kCompleted) return i;
  return std::nullopt;
}

// What the culprit did instead: its own call at the finding's number (an
// order or shape mismatch), else its last operation.
std::optional<size_t> culprit_entry(const flight::Dump& dump, const flight::Finding& f) {
  const auto& entries = dump.entries;
  if (entries.empty()) return std::nullopt;
  if (!f.group.empty())
    for (size_t i = entries.size(); i-- > 0;)
      if (entries[i].kind == "collective" && entries[i].group == f.group && entries[i].seq == f.seq) return i;
  return entries.size() - 1;
}

}  // namespace


std::vector<std::string> flight_dirs_beside(const std::vector<std::string>& trace_paths) {
  std::vector<std::string> dirs;
  for (const std::string& path : trace_paths) {
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const bool seen = std::find(dirs.begin(), dirs.end(), dir) != dirs.end();
    if (!seen && !flight::flight_files_in(dir).empty()) dirs.push_back(dir);
  }
  return dirs;
}

void FlightModel::open(const std::vector<std::string>& paths) {
  flight::FlightFiles read = flight::read_flight_files(paths);  // as distlab-trace why reads them
  set_dumps(std::move(read.dumps), std::move(read.refused), std::move(read.exits));
}

void FlightModel::set_dumps(std::vector<flight::Dump> dumps, std::vector<std::string> refused,
                            std::vector<flight::ExitRecord> exits) {
  files_ = std::move(dumps);
  diagnosis_ = flight::diagnose(flight::FlightFiles{files_, std::move(exits), std::move(refused)});
  loaded_ = true;
  rebuild();
}

void FlightModel::set_clock_offsets(const std::map<int, trace::ClockOffset>& offsets) {
  offsets_ = offsets;
  if (loaded_) rebuild();
}

void FlightModel::clear() { *this = FlightModel{}; }

const flight::Dump* FlightModel::dump_of(int rank) const {
  auto it = by_rank_.find(rank);
  return it == by_rank_.end() ? nullptr : &shifted_[it->second];
}

int64_t FlightModel::span_end_us(const FlightOpRef& ref) const {
  const flight::Dump& dump = *dump_of(ref.rank);
  const flight::Entry& e = dump.entries[ref.entry];
  return e.done() && e.ended_us != 0 ? e.ended_us : std::max(dump.dumped_us, e.entered_us);
}

bool FlightModel::is_culprit(int rank) const {
  const flight::Finding* f = marked_finding();
  return f != nullptr && std::find(f->culprits.begin(), f->culprits.end(), rank) != f->culprits.end();
}

bool FlightModel::is_marked(const FlightOpRef& ref) const {
  auto in = [&ref](const std::vector<FlightOpRef>& refs) { return std::find(refs.begin(), refs.end(), ref) != refs.end(); };
  return in(marker_.waiting_ops) || in(marker_.culprit_ops);
}

std::optional<std::pair<int64_t, int64_t>> FlightModel::focus_range() const {
  if (!has_marker()) return std::nullopt;
  constexpr size_t kBefore = 3;  // agreed operations shown before the parting point
  int64_t begin = marker_.band_begin_us;
  for (const FlightOpRef& ref : marker_.waiting_ops)
    if (entry(ref).entered_us == marker_.at_us)
      begin = std::min(begin, dump_of(ref.rank)->entries[ref.entry >= kBefore ? ref.entry - kBefore : 0].entered_us);
  const int64_t width = std::max<int64_t>(marker_.band_end_us - begin, 1000);
  return std::make_pair(begin - width / 10, marker_.band_end_us + width / 2);
}

void FlightModel::rebuild() {
  shifted_.clear();
  by_rank_.clear();
  ranks_.clear();
  marker_ = FlightMarker{};
  begin_us_ = end_us_ = 0;

  int world = 0;
  for (const flight::Dump& d : files_) {
    flight::Dump copy = d;
    if (auto it = offsets_.find(d.rank); it != offsets_.end()) shift(copy, it->second.offset_us);
    by_rank_[d.rank] = shifted_.size();
    shifted_.push_back(std::move(copy));
    world = std::max({world, d.world_size, d.rank + 1});
  }
  for (int r = 0; r < world; ++r) ranks_.push_back(r);

  bool any = false;
  for (const flight::Dump& d : shifted_)
    for (size_t i = 0; i < d.entries.size(); ++i) {
      const int64_t b = d.entries[i].entered_us;
      const int64_t e = span_end_us({d.rank, i});
      begin_us_ = any ? std::min(begin_us_, b) : b;
      end_us_ = any ? std::max(end_us_, e) : e;
      any = true;
    }

  if (diagnosis_.findings.empty() || diagnosis_.findings.front().cause == "none") return;
  const flight::Finding& f = diagnosis_.findings.front();
  for (int r : f.waiting)
    if (const flight::Dump* d = dump_of(r))
      if (auto i = waiting_entry(*d, f)) marker_.waiting_ops.push_back({r, *i});
  for (int r : f.culprits)
    if (const flight::Dump* d = dump_of(r))
      if (auto i = culprit_entry(*d, f)) marker_.culprit_ops.push_back({r, *i});
  if (marker_.waiting_ops.empty() && marker_.culprit_ops.empty()) return;  // nothing of it on record

  marker_.finding = 0;
  bool have_at = false;
  for (const FlightOpRef& ref : marker_.waiting_ops) {
    const int64_t t = entry(ref).entered_us;
    marker_.at_us = have_at ? std::min(marker_.at_us, t) : t;
    have_at = true;
  }
  // A culprit's operation counts from its end when it completed (it went on
  // elsewhere after it), else from when it entered it.
  for (const FlightOpRef& ref : marker_.culprit_ops) {
    const flight::Entry& e = entry(ref);
    const int64_t t = e.state == flight::State::kCompleted && e.ended_us != 0 ? e.ended_us : e.entered_us;
    marker_.culprit_us = marker_.has_culprit_time ? std::max(marker_.culprit_us, t) : t;
    marker_.has_culprit_time = true;
  }
  if (!have_at) marker_.at_us = marker_.culprit_us;  // every waiting rank's file is missing
  marker_.band_begin_us = marker_.band_end_us = marker_.at_us;
  for (const FlightOpRef& ref : marker_.culprit_ops) {
    const flight::Entry& e = entry(ref);
    const int64_t t = e.state == flight::State::kCompleted && e.ended_us != 0 ? e.ended_us : e.entered_us;
    marker_.band_begin_us = std::min(marker_.band_begin_us, t);
    marker_.band_end_us = std::max(marker_.band_end_us, t);
  }
}

}  // namespace distlab::viz
