// Chrome Trace Event JSON: the file format of DistLab traces.
//
// It opens in Perfetto (ui.perfetto.dev) and chrome://tracing as it is, and
// in DistLab's visualizer. Mapping: pid = rank, tid = lane (numbered per
// rank, named by "thread_name" metadata), each Event one complete ("X")
// event with ts/dur in microseconds; a send and its recv also emit a flow
// start ("s", at the send's begin) and flow end ("f", at the recv's end: when
// the data arrived) with the same id, drawn as an arrow. A counter sample
// (Event::is_counter()) is one counter ("C") event instead,
// {"ph":"C","pid":RANK,"name":NAME,"ts":TS,"args":{"parameters":123,...}},
// its series as numbers: a counter track of that rank named NAME. A rank on
// another machine writes its clock's offset to rank 0 as "clock_offset"
// metadata ({"ph":"M","name":"clock_offset","pid":R,"args":{"offset_us":..,
// "uncertainty_us":..}}); readers add it to that rank's times.
// DistLab's own fields ride in "args" (lane, bytes, peer, flow), so the file
// reads back into exactly the events that were written.
//
// Events are written one per line as they come, so a trace of a run that
// crashed is still readable up to its last line.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "trace/recorder.hpp"
#include "trace/tracks.hpp"

namespace distlab::trace {

// One event as a single-line JSON object: an "X" event, or a "C" event for
// a counter sample. `tid` is the lane's number in the file (unused by "C");
// the live stream, which has no metadata, uses 0.
std::string event_to_json(const Event& event, int tid);
// `rank`'s clock offset to rank 0 as one line of "clock_offset" metadata:
// in a trace file, and first on a rank's live stream.
std::string clock_offset_json(int rank, const ClockOffset& offset);

class ChromeJsonSink : public Sink {
 public:
  // Opens (truncates) `path`, making its folder if missing; throws
  // std::runtime_error naming the path.
  explicit ChromeJsonSink(const std::string& path);
  ~ChromeJsonSink() override;
  void write(const Event& event) override;
  // A recv with its arrow's end placed at `arrival_us` (distlab-trace merge,
  // which knows the send: never before it began).
  void write(const Event& event, int64_t arrival_us);
  // The "clock_offset" metadata of `rank`.
  void write_clock_offset(int rank, const ClockOffset& offset);
  void flush() override;
  // Writes the closing bracket; later events are dropped.
  void close();
  const std::string& path() const { return path_; }

 private:
  // Writes the rank's "process_name" metadata the first time it is seen.
  void name_rank(int rank);
  // The tid of `lane`'s track at `level` on `rank`, named the first time.
  int track_tid(int rank, const std::string& lane, int level);
  void put_line(const std::string& line);

  std::string path_;
  std::FILE* file_ = nullptr;
  bool first_ = true;
  TrackLevels levels_;
  std::map<std::tuple<int, std::string, int>, int> tids_;  // (rank, lane, level) -> tid
  std::map<int, int> tracks_of_rank_;
  std::set<int> named_ranks_;
};

}  // namespace distlab::trace
