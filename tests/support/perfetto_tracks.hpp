// What Perfetto needs of a Chrome-trace file, checked on the file's own
// JSON (read with nlohmann::json, not DistLab's reader):
// - on each thread track (pid, tid) the complete ("X") events nest or stay
//   apart: Perfetto draws partly overlapping ones wrong;
// - each flow arrow ("s", "f") lands on the slice it is meant for: the
//   send or recv that carries the arrow's id in args.flow, on the arrow's
//   track, around its time, with no slice nested inside it there.
//
//   const auto report = test_support::check_tracks(path);
//   EXPECT_EQ(report.partial_overlaps, 0u) << report.first_problem;
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace distlab::test_support {

struct TrackReport {
  size_t complete = 0;          // "X" events
  size_t tracks = 0;            // (pid, tid) pairs holding one
  size_t partial_overlaps = 0;  // events that start inside another of their track and end after it
  size_t flows = 0;             // "s" and "f" events
  size_t misplaced_flows = 0;   // of those, not on the slice carrying their id
  std::string first_problem;    // the first of either, described
};

namespace perfetto_detail {

struct Slice {
  double begin = 0, end = 0;
  std::string name, flow;
};
using Track = std::pair<int64_t, int64_t>;  // (pid, tid)

inline std::string describe(const Track& t, const Slice& s) {
  return "pid " + std::to_string(t.first) + " tid " + std::to_string(t.second) + " '" + s.name + "' [" +
         std::to_string(s.begin) + ", " + std::to_string(s.end) + "]";
}

// Sweeps one track in begin order (longest first on ties) with a stack of
// the slices still open: a slice that ends after the innermost open one
// overlaps it partly.
inline void check_nesting(const Track& track, std::vector<Slice> slices, TrackReport& report) {
  std::sort(slices.begin(), slices.end(),
            [](const Slice& a, const Slice& b) { return a.begin != b.begin ? a.begin < b.begin : a.end > b.end; });
  std::vector<const Slice*> open;
  for (const Slice& s : slices) {
    while (!open.empty() && open.back()->end <= s.begin) open.pop_back();
    if (!open.empty() && s.end > open.back()->end) {
      if (report.partial_overlaps++ == 0)
        report.first_problem = describe(track, s) + " overlaps " + describe(track, *open.back()) + " partly";
      continue;
    }
    open.push_back(&s);
  }
}

// Whether the arrow `id` at `ts` lands on its slice: the slice carrying `id`
// holds ts and no slice nested inside it does (Perfetto binds an arrow to
// the innermost slice around it; a slice that only touches at ts is apart).
inline bool lands_on_its_slice(const std::vector<Slice>& slices, const std::string& id, double ts) {
  for (const Slice& mine : slices) {
    if (mine.flow != id || ts < mine.begin || mine.end < ts) continue;
    bool deeper = false;
    for (const Slice& s : slices)
      deeper |= &s != &mine && mine.begin <= s.begin && s.end <= mine.end &&
                (s.begin != mine.begin || s.end != mine.end) && s.begin <= ts && ts <= s.end;
    if (!deeper) return true;
  }
  return false;
}

}  // namespace perfetto_detail

inline TrackReport check_tracks(const nlohmann::json& doc) {
  using namespace perfetto_detail;
  TrackReport report;
  std::map<Track, std::vector<Slice>> tracks;
  std::vector<const nlohmann::json*> flows;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "s" || ph == "f") flows.push_back(&e);
    if (ph != "X") continue;
    ++report.complete;
    Slice s;
    s.begin = e.at("ts").get<double>();
    s.end = s.begin + e.value("dur", 0.0);
    s.name = e.value("name", "");
    if (e.contains("args") && e["args"].contains("flow")) s.flow = e["args"]["flow"].get<std::string>();
    tracks[{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}].push_back(std::move(s));
  }
  report.tracks = tracks.size();
  for (const auto& [track, slices] : tracks) check_nesting(track, slices, report);
  for (const nlohmann::json* f : flows) {
    ++report.flows;
    const Track track{f->at("pid").get<int64_t>(), f->at("tid").get<int64_t>()};
    const std::string id = f->at("id").get<std::string>();
    const auto it = tracks.find(track);
    if (it != tracks.end() && lands_on_its_slice(it->second, id, f->at("ts").get<double>())) continue;
    if (report.misplaced_flows++ == 0 && report.first_problem.empty())
      report.first_problem = "flow " + id + " (" + f->at("ph").get<std::string>() + ") at pid " +
                             std::to_string(track.first) + " tid " + std::to_string(track.second) + " ts " +
                             f->at("ts").dump() + " is not on the innermost slice carrying its id";
  }
  return report;
}

inline TrackReport check_tracks(const std::string& path) {
  std::ifstream in(path);
  return check_tracks(nlohmann::json::parse(in));
}

}  // namespace distlab::test_support
