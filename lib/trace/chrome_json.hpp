// Chrome Trace Event JSON: the file format of DistLab traces.
//
// It opens in Perfetto (ui.perfetto.dev) and chrome://tracing as it is, and
// in DistLab's visualizer. Mapping: pid = rank, tid = lane (numbered per
// rank, named by "thread_name" metadata), each Event one complete ("X")
// event with ts/dur in microseconds; a send and its recv also emit a flow
// start ("s") and flow end ("f") with the same id, drawn as an arrow.
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
#include <utility>

#include "trace/recorder.hpp"

namespace distlab::trace {

// One event as a single-line JSON object ("X" event). `tid` is the lane's
// number in the file; the live stream, which has no metadata, uses 0.
std::string event_to_json(const Event& event, int tid);

class ChromeJsonSink : public Sink {
 public:
  // Opens (truncates) `path`; throws std::runtime_error naming the path.
  explicit ChromeJsonSink(const std::string& path);
  ~ChromeJsonSink() override;
  void write(const Event& event) override;
  void flush() override;
  // Writes the closing bracket; later events are dropped.
  void close();
  const std::string& path() const { return path_; }

 private:
  int lane_tid(int rank, const std::string& lane);
  void put_line(const std::string& line);

  std::string path_;
  std::FILE* file_ = nullptr;
  bool first_ = true;
  std::map<std::pair<int, std::string>, int> tids_;
  std::set<int> named_ranks_;
};

}  // namespace distlab::trace
