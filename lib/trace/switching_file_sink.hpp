// One Chrome trace file per labelled part of a run: a sink that writes to
// the file of the current label and switches files on open().
//
// Lesson 10 traces each pipeline schedule into a file of its own, so that
// each opens alone in Perfetto or distlab-viz and shows one schedule from
// time 0:
//
//   auto files = std::make_shared<trace::SwitchingFileSink>("pp.json");
//   recorder->add_sink(files);
//   files->open("gpipe", rank, several_processes);   // pp.gpipe.json (pp.gpipe.rank1.json, ...)
//   ... events ...
//   files->open("1f1b", rank, several_processes);    // pp.gpipe.json closed, pp.1f1b.json opened
//   files->close();                                  // later events go nowhere
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "trace/chrome_json.hpp"
#include "trace/recorder.hpp"

namespace distlab::trace {

// `file` with ".label" inserted before its extension: "pp.json" -> "pp.gpipe.json",
// "out" -> "out.gpipe", "runs.v2/pp" -> "runs.v2/pp.gpipe".
std::string with_label(const std::string& file, const std::string& label);

class SwitchingFileSink : public Sink {
 public:
  // `file` as given to --trace ("{rank}" allowed, as in trace_file_for).
  explicit SwitchingFileSink(std::string file);

  // Closes the current file (if any) and opens the one for `label` in this
  // process (trace_file_for(with_label(file, label), rank, several_processes)).
  // Returns its path. Throws std::runtime_error when it cannot be opened.
  std::string open(const std::string& label, int rank, bool several_processes);
  // Closes the current file; later events go nowhere until the next open().
  void close();

  void write(const Event& event) override;
  void flush() override;

 private:
  std::string file_;
  std::mutex mutex_;  // open/close come from the lesson's threads, write from the recorder's
  std::shared_ptr<ChromeJsonSink> current_;
};

}  // namespace distlab::trace
