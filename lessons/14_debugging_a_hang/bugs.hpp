// The bugs lesson 14 can put into one rank (--bug, --culprit, --at-step),
// each a real way a data-parallel job hangs. At step K the culprit:
//
//   skip   leaves its training loop before step K's gradient all-reduce
//          (#2K-1): its share of the data ran out one step early. The others
//          wait in #2K-1 for it. On thread ranks it returns from its work; a
//          process stays busy elsewhere (closing its connections would make
//          the others fail at once instead of waiting), until stopped.
//   order  reduces its loss (#2K) before all-reducing its gradients: two
//          lines swapped on one rank, so at #2K-1 it calls reduce where the
//          others call all_reduce.
//   shape  all-reduces 160 of the 161 gradient elements (the output bias
//          left out: a model built differently on one rank).
//   dead   stops before #2K-1: throws on thread ranks, SIGKILLs itself in a
//          process (nothing it could write survives).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace distlab::lesson14 {

enum class Bug { kNone, kSkip, kOrder, kShape, kDead };

inline const std::vector<std::string>& bug_names() {
  static const std::vector<std::string> names = {"none", "skip", "order", "shape", "dead"};
  return names;
}

inline Bug bug_from_name(const std::string& name) {
  const auto& names = bug_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Bug>(i);
  throw std::invalid_argument("--bug must be none, skip, order, shape or dead, not '" + name + "'");
}

inline const char* to_string(Bug bug) { return bug_names()[static_cast<size_t>(bug)].c_str(); }

// What the culprit does at `step`, whose gradient all-reduce is #`seq`, in
// a few words, for the job's description.
inline std::string what_it_does(Bug bug, int step, uint64_t seq) {
  const std::string k = std::to_string(step), n = "#" + std::to_string(seq);
  switch (bug) {
    case Bug::kNone: return "no bug: every rank calls the same collectives in the same order";
    case Bug::kSkip: return "leaves its loop before step " + k + "'s gradient all-reduce " + n + " (its data ran out)";
    case Bug::kOrder: return "reduces step " + k + "'s loss before all-reducing its gradients: reduce at " + n;
    case Bug::kShape: return "all-reduces 160 of step " + k + "'s 161 gradient elements at " + n;
    case Bug::kDead: return "dies at step " + k + ", before the gradient all-reduce " + n;
  }
  return "";
}

}  // namespace distlab::lesson14
