// Switching tracing on: by flags (--trace FILE, --live HOST:PORT) or by the
// environment (DISTLAB_TRACE, DISTLAB_TRACE_LIVE), flags winning.
#pragma once

#include <memory>
#include <string>

#include "trace/recorder.hpp"

namespace distlab::trace {

struct Config {
  // Chrome trace file; "" = none. "{rank}" in it is replaced by the rank of
  // the process that writes it, so the ranks of a multi-process job do not
  // overwrite one another (a path without it gets ".rankN" added there).
  std::string file;
  // HOST:PORT of a live listener (the visualizer); "" = none.
  std::string live;

  static Config from_env();
  // Fills what is empty here from the environment.
  Config with_env_defaults() const;
  bool any() const { return !file.empty() || !live.empty(); }
};

// The file a process writes: `file` with "{rank}" replaced; when the job has
// several processes and no "{rank}" is given, "out.json" -> "out.rank3.json".
std::string trace_file_for(const std::string& file, int rank, bool several_processes);

// A recorder with the configured sinks (none when config.any() is false).
std::shared_ptr<Recorder> make_recorder(const Config& config, int rank = 0, bool several_processes = false);

// Adds the configured sinks to `recorder`; with `clock_offset`, the file and
// the live stream start with that rank's "clock_offset" metadata
// (comm/clock_sync.hpp).
void add_sinks(Recorder& recorder, const Config& config, int rank, bool several_processes,
               const ClockOffset* clock_offset = nullptr);

}  // namespace distlab::trace
