#include "trace/merge.hpp"

#include <algorithm>
#include <unordered_map>

#include "trace/chrome_json.hpp"
#include "trace/reader.hpp"

namespace distlab::trace {

MergeReport merge_trace_files(const std::vector<std::string>& inputs, const std::string& output) {
  MergeReport report;
  std::vector<Event> all;
  for (const auto& path : inputs) {
    TraceInfo info;
    auto events = read_chrome_trace(path, ReadLimits{}, &info);
    for (Event& e : events) {
      auto it = info.clock_offsets.find(e.rank);
      if (it == info.clock_offsets.end()) continue;
      apply_clock_offset(e, it->second.offset_us);
    }
    report.offsets.insert(info.clock_offsets.begin(), info.clock_offsets.end());
    all.insert(all.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  }
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) { return a.begin_us < b.begin_us; });

  // flow id -> the send's begin, to place each recv's arrow end.
  std::unordered_map<uint64_t, int64_t> send_begin;
  for (const Event& e : all)
    if (e.flow != 0 && e.category == "send") send_begin.emplace(e.flow, e.begin_us);

  ChromeJsonSink sink(output);
  for (const auto& e : all) {
    auto it = e.flow != 0 && e.category == "recv" ? send_begin.find(e.flow) : send_begin.end();
    if (it == send_begin.end()) {
      sink.write(e);
      continue;
    }
    ++report.flows;
    if (e.end_us < it->second) ++report.clamped_flows;
    sink.write(e, std::max(e.end_us, it->second));
  }
  sink.close();
  report.events = all.size();
  return report;
}

}  // namespace distlab::trace
