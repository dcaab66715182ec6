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

std::vector<trace::Event> make_synthetic_memory(int ranks, int64_t psi, int64_t begin_us, int64_t end_us) {
  if (ranks < 1) throw std::invalid_argument("synthetic memory: needs at least 1 rank, got " + std::to_string(ranks));
  const char* stages[] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  constexpr int kSteps = 3;
  const int64_t p = ranks;
  const int64_t step_us = std::max<int64_t>(3, (end_us - begin_us) / (4 * kSteps));
  const int64_t activations = 6 * psi / 5;  // a batch's saved tensors, about 1.2 bytes per parameter here
  const int64_t buffers = 1 << 20;
  std::vector<trace::Event> events;
  for (int g = 0; g < 4; ++g) {
    // The paper's bytes, in ZeRO's order: parameters 4 Psi, gradients 4 Psi,
    // Adam's state 8 Psi; each stage divides one more of them by p.
    const int64_t parameters = g == 3 ? 4 * psi / p : 4 * psi;
    const int64_t gradients = g >= 2 ? 4 * psi / p : 4 * psi;
    const int64_t state = g >= 1 ? 8 * psi / p : 8 * psi;
    const std::string stage = stages[g];
    for (int step = 0; step < kSteps; ++step) {
      const int64_t t = begin_us + (g * kSteps + step) * step_us;
      for (int r = 0; r < ranks; ++r) {
        // Ranks differ a little: uneven shards, and rank 0 keeps a copy for checkpoints.
        const int64_t extra = r == 0 ? psi / 10 : (r * psi) / 100;
        const int64_t gathered = g == 3 ? 4 * psi / 4 : 0;  // ZeRO-3: the largest unit, a quarter of the model
        const int64_t state_now = step == 0 ? 0 : state;
        const trace::CounterValues before = {{"parameters", parameters + extra}, {"gradients", 0},
                                             {"optimizer state", state_now}, {"buffers", buffers},
                                             {"activations", 0}};
        const trace::CounterValues peak = {{"parameters", parameters + extra + gathered}, {"gradients", gradients},
                                           {"optimizer state", state_now}, {"buffers", buffers},
                                           {"activations", activations}};
        const trace::CounterValues after = {{"parameters", parameters + extra}, {"gradients", gradients},
                                            {"optimizer state", state}, {"buffers", buffers}, {"activations", 0}};
        events.push_back(trace::counter_event(r, "memory " + stage, before, t + r));
        events.push_back(trace::counter_event(r, "memory " + stage, peak, t + step_us / 2 + r));
        events.push_back(trace::counter_event(r, "memory " + stage, after, t + step_us * 9 / 10 + r));
        if (step == kSteps - 1)
          events.push_back(trace::counter_event(r, "accounting " + stage,
                                                {{"parameters", parameters}, {"gradients", gradients},
                                                 {"optimizer state", state}, {"buffers", 0}, {"activations", 0}},
                                                t + step_us * 9 / 10 + r));
      }
    }
  }
  return events;
}

}  // namespace distlab::viz
