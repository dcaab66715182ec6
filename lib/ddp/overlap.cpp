#include "ddp/overlap.hpp"

#include <algorithm>

namespace distlab::ddp {

OverlapStats overlap_of_step(const std::vector<trace::Event>& events, int rank, int64_t step) {
  const std::string wanted = std::to_string(step);
  int64_t backward_end = -1;
  for (const auto& e : events)
    if (e.rank == rank && e.category == "ddp_wait" && e.arg("step") == wanted) backward_end = e.begin_us;
  OverlapStats stats;
  if (backward_end < 0) return stats;
  int64_t last_end = backward_end;
  for (const auto& e : events) {
    if (e.rank != rank || e.category != "bucket" || e.arg("step") != wanted) continue;
    ++stats.buckets;
    stats.all_reduce_us += e.duration_us();
    stats.hidden_us += std::max<int64_t>(0, std::min(e.end_us, backward_end) - e.begin_us);
    last_end = std::max(last_end, e.end_us);
  }
  stats.exposed_us = last_end - backward_end;
  return stats;
}

}  // namespace distlab::ddp
