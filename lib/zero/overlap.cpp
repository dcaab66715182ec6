#include "zero/overlap.hpp"

#include <algorithm>
#include <utility>

namespace distlab::zero {
namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end), sorted, disjoint

Intervals union_of(Intervals spans) {
  std::sort(spans.begin(), spans.end());
  Intervals merged;
  for (const auto& [begin, end] : spans) {
    if (!merged.empty() && begin <= merged.back().second)
      merged.back().second = std::max(merged.back().second, end);
    else
      merged.emplace_back(begin, end);
  }
  return merged;
}

int64_t length_of(const Intervals& spans) {
  int64_t total = 0;
  for (const auto& [begin, end] : spans) total += end - begin;
  return total;
}

// The length of the intersection of two unions (a sweep over both).
int64_t common_length(const Intervals& a, const Intervals& b) {
  int64_t total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    total += std::max<int64_t>(0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
    if (a[i].second < b[j].second) ++i; else ++j;
  }
  return total;
}

// The parts of `a` outside `b`.
Intervals difference(const Intervals& a, const Intervals& b) {
  Intervals out;
  size_t j = 0;
  for (auto [begin, end] : a) {
    while (j < b.size() && b[j].second <= begin) ++j;
    for (size_t k = j; k < b.size() && b[k].first < end; ++k) {
      if (b[k].first > begin) out.emplace_back(begin, b[k].first);
      begin = std::max(begin, b[k].second);
    }
    if (begin < end) out.emplace_back(begin, end);
  }
  return out;
}

}  // namespace

CommOverlap comm_overlap_of_step(const std::vector<trace::Event>& events, int rank, int64_t step,
                                 const std::vector<std::string>& compute) {
  const std::string wanted = std::to_string(step);
  Intervals comm, work, waits;
  CommOverlap overlap;
  for (const auto& e : events) {
    if (e.rank != rank || e.is_counter() || e.arg("step") != wanted) continue;
    if (e.category == "zero_all_gather" || e.category == "zero_reduce_scatter") {
      comm.emplace_back(e.begin_us, e.end_us);
      ++overlap.collectives;
    } else if (e.category == "zero_wait") {
      waits.emplace_back(e.begin_us, e.end_us);
    } else if (std::find(compute.begin(), compute.end(), e.category) != compute.end()) {
      work.emplace_back(e.begin_us, e.end_us);
    }
  }
  comm = union_of(std::move(comm));
  overlap.comm_us = length_of(comm);
  overlap.hidden_us = common_length(comm, difference(union_of(std::move(work)), union_of(std::move(waits))));
  return overlap;
}

}  // namespace distlab::zero
