// How much of DDP's communication hid behind backward, read from a trace.
//
// In one synchronized step the reducer records each bucket's all-reduce
// (category "bucket", on the comm thread, from start to end of the
// collective) and "wait for buckets" (category "ddp_wait"), which begins the
// moment backward has computed its last gradient. All-reduce time before
// that moment ran while backward was still computing: hidden. The rest is
// time the optimizer waited for.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/event.hpp"

namespace distlab::ddp {

struct OverlapStats {
  int buckets = 0;
  int64_t all_reduce_us = 0;  // sum of the buckets' all-reduce durations
  int64_t hidden_us = 0;      // the part of it before backward ended
  int64_t exposed_us = 0;     // from the end of backward to the last bucket's end
  double fraction() const { return all_reduce_us > 0 ? static_cast<double>(hidden_us) / all_reduce_us : 0.0; }
};

// Stats of step `step` of rank `rank`; buckets == 0 when the trace has none.
OverlapStats overlap_of_step(const std::vector<trace::Event>& events, int rank, int64_t step);

}  // namespace distlab::ddp
