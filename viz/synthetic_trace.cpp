#include "synthetic_trace.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

namespace distlab::viz {

std::vector<trace::Event> make_synthetic_trace(const SyntheticTraceOptions& o) {
  if (o.ranks < 2) throw std::invalid_argument("synthetic trace: needs at least 2 ranks, got " + std::to_string(o.ranks));
  if (o.events < 0) throw std::invalid_argument("synthetic trace: negative event count");
  std::mt19937 rng(o.seed);
  auto jitter = [&rng](int64_t base) {
    return base + static_cast<int64_t>(std::uniform_int_distribution<int>(0, static_cast<int>(base / 2))(rng));
  };
  const int p = o.ranks;
  const int64_t buffer_bytes = 4 << 20;
  const int64_t chunk_bytes = buffer_bytes / p;
  std::vector<trace::Event> events;
  events.reserve(static_cast<size_t>(o.events));
  auto push = [&](trace::Event e) {
    if (static_cast<int64_t>(events.size()) < o.events) events.push_back(std::move(e));
  };

  int64_t t = o.start_us;
  for (int64_t iteration = 0; static_cast<int64_t>(events.size()) < o.events; ++iteration) {
    const std::string step = std::to_string(iteration);
    // Compute: forward then backward; ranks finish at slightly different times.
    std::vector<int64_t> ready(p);
    for (int r = 0; r < p; ++r) {
      const int64_t fwd = jitter(800);
      const int64_t bwd = jitter(1600);
      push({r, trace::kLaneCompute, "forward", "fwd", t, t + fwd, 0, -1, 0, {{"step", step}}});
      push({r, trace::kLaneCompute, "backward", "bwd", t + fwd, t + fwd + bwd, 0, -1, 0, {{"step", step}}});
      ready[r] = t + fwd + bwd;
    }
    // Comm: the ring starts when the slowest rank is ready; each of its
    // 2(p-1) steps sends one chunk right and receives one from the left.
    const int64_t ring_start = *std::max_element(ready.begin(), ready.end()) + 5;
    int64_t s0 = ring_start;
    std::vector<trace::Event> step_events;
    for (int s = 0; s < 2 * (p - 1); ++s) {
      const int64_t d = jitter(60);
      for (int r = 0; r < p; ++r) {
        const int right = (r + 1) % p;
        const int left = (r + p - 1) % p;
        const uint64_t send_flow = trace::flow_id(r, right, iteration, s);
        const uint64_t recv_flow = trace::flow_id(left, r, iteration, s);
        const std::string phase = s < p - 1 ? "reduce-scatter" : "all-gather";
        step_events.push_back({r, trace::kLaneComm, "send", "send", s0, s0 + d, chunk_bytes, right, send_flow,
                               {{"tag", step}, {"phase", phase}}});
        step_events.push_back({r, trace::kLaneComm, "recv", "recv", s0 + 1, s0 + d + 4, chunk_bytes, left, recv_flow,
                               {{"tag", step}, {"phase", phase}}});
      }
      s0 += d + 6;
    }
    for (int r = 0; r < p; ++r)
      push({r, trace::kLaneComm, "all_reduce ring", "collective", ring_start - 2, s0, buffer_bytes, -1, 0,
            {{"step", step}, {"algorithm", "ring"}}});
    for (trace::Event& e : step_events) push(std::move(e));
    t = s0 + jitter(40);
  }
  return events;
}

}  // namespace distlab::viz
