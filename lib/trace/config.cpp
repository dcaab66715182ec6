#include "trace/config.hpp"

#include <cstdlib>

#include "trace/chrome_json.hpp"
#include "trace/live_stream.hpp"

namespace distlab::trace {
namespace {
std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}
}  // namespace

Config Config::from_env() { return Config{env_or_empty("DISTLAB_TRACE"), env_or_empty("DISTLAB_TRACE_LIVE")}; }

Config Config::with_env_defaults() const {
  Config env = from_env();
  return Config{file.empty() ? env.file : file, live.empty() ? env.live : live};
}

std::string trace_file_for(const std::string& file, int rank, bool several_processes) {
  const std::string marker = "{rank}";
  auto at = file.find(marker);
  if (at != std::string::npos) return file.substr(0, at) + std::to_string(rank) + file.substr(at + marker.size());
  if (!several_processes) return file;
  auto dot = file.rfind('.');
  auto slash = file.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = file.size();
  return file.substr(0, dot) + ".rank" + std::to_string(rank) + file.substr(dot);
}

void add_sinks(Recorder& recorder, const Config& config, int rank, bool several_processes,
               const ClockOffset* clock_offset) {
  if (!config.file.empty()) {
    auto file = std::make_shared<ChromeJsonSink>(trace_file_for(config.file, rank, several_processes));
    if (clock_offset != nullptr) file->write_clock_offset(rank, *clock_offset);
    recorder.add_sink(file);
  }
  if (!config.live.empty()) {
    auto live = std::make_shared<LiveSink>(config.live);
    if (clock_offset != nullptr) live->write_clock_offset(rank, *clock_offset);
    recorder.add_sink(live);
  }
}

std::shared_ptr<Recorder> make_recorder(const Config& config, int rank, bool several_processes) {
  auto recorder = std::make_shared<Recorder>();
  add_sinks(*recorder, config, rank, several_processes);
  return recorder;
}

}  // namespace distlab::trace
