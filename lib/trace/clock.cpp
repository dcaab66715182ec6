#include "trace/clock.hpp"

#include <chrono>

#include "trace/event.hpp"

namespace distlab::trace {

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string Event::arg(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : args)
    if (k == key) return v;
  return fallback;
}

uint64_t flow_id(int src, int dst, int64_t tag, uint64_t seq) {
  // splitmix64 over the four fields: cheap, and collisions between distinct
  // messages of one job are vanishingly unlikely.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(static_cast<uint64_t>(static_cast<uint32_t>(src)));
  h = mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(dst)));
  h = mix(h ^ static_cast<uint64_t>(tag));
  h = mix(h ^ seq);
  return h == 0 ? 1 : h;
}

}  // namespace distlab::trace
