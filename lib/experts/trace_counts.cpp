#include "experts/trace_counts.hpp"

#include <algorithm>

namespace distlab::experts {

void add_counts(MoeStats& into, const MoeStats& from) {
  into.kept.resize(std::max(into.kept.size(), from.kept.size()), 0);
  into.dropped.resize(std::max(into.dropped.size(), from.dropped.size()), 0);
  for (size_t e = 0; e < from.kept.size(); ++e) into.kept[e] += from.kept[e];
  for (size_t e = 0; e < from.dropped.size(); ++e) into.dropped[e] += from.dropped[e];
  into.capacity = from.capacity;
}

void record_tokens_per_expert(trace::Recorder* recorder, int rank, const std::string& label, const MoeStats& stats) {
  if (recorder == nullptr || !recorder->enabled()) return;
  trace::CounterValues values;
  for (size_t e = 0; e < stats.kept.size(); ++e) values.emplace_back("kept " + std::to_string(e), stats.kept[e]);
  for (size_t e = 0; e < stats.dropped.size(); ++e)
    values.emplace_back("dropped " + std::to_string(e), stats.dropped[e]);
  values.emplace_back("capacity", stats.capacity);
  recorder->counter(rank, kExpertsCounterPrefix + label, values);
}

}  // namespace distlab::experts
