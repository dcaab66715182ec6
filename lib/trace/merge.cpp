#include "trace/merge.hpp"

#include <algorithm>

#include "trace/chrome_json.hpp"
#include "trace/reader.hpp"

namespace distlab::trace {

size_t merge_trace_files(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<Event> all;
  for (const auto& path : inputs) {
    auto events = read_chrome_trace(path);
    all.insert(all.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  }
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) { return a.begin_us < b.begin_us; });
  ChromeJsonSink sink(output);
  for (const auto& e : all) sink.write(e);
  sink.close();
  return all.size();
}

}  // namespace distlab::trace
