// Opening trace files for the visualizer: the library's streaming reader
// plus what a viewer needs.
//
// - Events go straight into the TraceModel (load_trace_into): no vector of
//   a million trace::Events in between, so a 1 M-event file is in the
//   model, finalized, in about a second and 125 MB (viz/README.md,
//   Performance).
// - A trace cut short (a run that crashed, or one still being written) is
//   read up to its last complete line: the library's sink writes one event
//   per line, so every complete line is a whole event. The result carries a
//   warning saying how much was recovered.
// - Clock offsets a multi-machine job wrote into its files are applied.
// - Limits suited to an interactive program (see kViewerLimits), and every
//   failure, whatever its kind, becomes one TraceFormatError naming the file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trace/event.hpp"
#include "trace/push_reader.hpp"
#include "trace/reader.hpp"
#include "trace_model.hpp"

namespace distlab::viz {

// 10 million events (about 1.5 GB once in the model). The file is streamed,
// so its size matters only as a sanity bound.
inline const trace::ReadLimits kViewerLimits{int64_t{16} << 30, 10'000'000};

struct LoadedTrace {
  std::vector<trace::Event> events;   // clock offsets already applied
  std::vector<std::string> warnings;  // recovered from a truncated file, no events, ...
  trace::TraceInfo info;
};

struct LoadReport {
  size_t events = 0;
  std::vector<std::string> warnings;
  trace::TraceInfo info;
};

// Appends the file's events to `model` (not finalized). On failure the model
// is left as it was. Throws trace::TraceFormatError when nothing can be read.
LoadReport load_trace_into(const std::string& path, TraceModel& model, const trace::ReadLimits& limits = kViewerLimits);

// Files opened together (a job's rank files): one model, finalized.
struct OpenedTraces {
  std::vector<std::string> paths;
  TraceModel model;
  std::vector<std::string> warnings;
  std::map<int, trace::ClockOffset> clock_offsets;
};
// Each of `paths` into one model (load_trace_into), then finalized. Throws
// trace::TraceFormatError as load_trace_into does.
OpenedTraces open_traces(const std::vector<std::string>& paths, const trace::ReadLimits& limits = kViewerLimits);

// The same files read while their bytes arrive (the page's fetch, viz/web):
// each file's events go into the model as its pieces come, so reading
// overlaps the download. Only the fast path: when every file was a trace
// read whole, opened() is what open_traces(paths) would give; when one was
// not (cut short, bad bytes, no events), opened() is null and the caller
// opens the files the usual way once they are written, with its recovery
// and messages.
class TraceDownload {
 public:
  explicit TraceDownload(std::vector<std::string> paths, const trace::ReadLimits& limits = kViewerLimits);
  ~TraceDownload();
  void begin_file(int64_t expected_bytes = 0);  // the next of `paths` (its size, when known)
  char* space(size_t n);             // room for its next n bytes
  void commit(size_t n);             // written there: read what they complete
  void end_file();
  std::unique_ptr<OpenedTraces> opened();  // after the last end_file()

 private:
  void give_up();

  trace::ReadLimits limits_;
  std::unique_ptr<OpenedTraces> opened_;
  std::unique_ptr<trace::ChromePushReader> reader_;
  TraceModel::Checkpoint mark_{};
  size_t files_ = 0;
  bool failed_ = false;
  std::string scratch_;
};

// The same, collected (tests, small files).
LoadedTrace load_trace_text(const std::string& text, const trace::ReadLimits& limits = kViewerLimits);
LoadedTrace load_trace_file(const std::string& path, const trace::ReadLimits& limits = kViewerLimits);

// The files a job's processes wrote for `--trace path` (path.rank0.json,
// path.rank1.json, ... as trace::trace_file_for names them, up to the first
// missing rank) when `path` itself does not exist; empty otherwise.
std::vector<std::string> rank_files_of(const std::string& path);

// Replaces each path in `paths` that does not exist by its ranks' files, if
// any; returns one line per path replaced, saying which files were opened.
std::vector<std::string> open_rank_files_instead(std::vector<std::string>& paths);

}  // namespace distlab::viz
