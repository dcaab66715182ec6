// Runs a Plan "on paper": every rank's buffer is a row of cells, each cell
// recording which element it is and which ranks have contributed to it.
// Nothing here shares code with the plan builders: the replay knows only the
// conventions of plan.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/plan.hpp"

namespace distlab::collectives::testing {

struct Cell {
  static constexpr int64_t kUndefined = -1;  // garbage the plan must overwrite
  static constexpr int64_t kCorrupt = -2;    // combined with garbage or with another element
  int64_t element = kUndefined;              // which element of the buffer this is
  uint64_t ranks = 0;                        // bit r: rank r's value is in the sum
  bool counted_twice = false;                // some rank's value was added twice

  bool operator==(const Cell& o) const {
    return element == o.element && ranks == o.ranks && counted_twice == o.counted_twice;
  }
};

using Buffers = std::vector<std::vector<Cell>>;  // [rank][element]

// The buffers a collective starts from: broadcast, the root's data only;
// all_gather, each rank's own chunk only; otherwise every rank's own data.
Buffers initial_buffers(const Plan& plan);
// Whether element i of `rank`'s buffer holds a result at the end: all of
// them, except reduce (root only) and reduce_scatter (the rank's own chunk).
bool in_result(const Plan& plan, int rank, int64_t i);
// What the result elements of every rank must hold at the end.
Buffers expected_buffers(const Plan& plan);

// Applies every step to `buffers`. Returns the first structural fault
// (rank out of range, a rank sending to itself, a range outside the buffer
// or not matching its chunk, two copies into one element in one step), or
// "" when there is none.
std::string replay(const Plan& plan, Buffers& buffers);

// "" when every rank's result elements match `expected`, else the first
// mismatch, readably.
std::string compare_results(const Plan& plan, const Buffers& got, const Buffers& expected);

}  // namespace distlab::collectives::testing
