#include "trace/clock.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#include "trace/event.hpp"

#include <unistd.h>

namespace distlab::trace {

namespace {

int64_t clock_shift_us() {
  const char* text = std::getenv("DISTLAB_TRACE_CLOCK_SHIFT_US");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long long shift = std::strtoll(text, &end, 10);
  if (*end != '\0' || shift <= -(1LL << 50) || shift >= (1LL << 50))
    throw std::runtime_error(std::string("DISTLAB_TRACE_CLOCK_SHIFT_US must be a whole number of microseconds, got '") +
                             text + "'");
  return shift;
}

}  // namespace

uint64_t clock_domain() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  if (boot.empty()) {  // no /proc: the host's name stands for its boot
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    boot = host;
  }
  return flow_id(0, 0, static_cast<int64_t>(std::hash<std::string>{}(boot)),
                 static_cast<uint64_t>(clock_shift_us()));
}

int64_t now_us() {
  using namespace std::chrono;
  static const int64_t shift = clock_shift_us();
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count() + shift;
}

namespace {

// The wall clock minus now_us(): of five readings (trace clock, wall clock,
// trace clock), the one whose two trace readings lie closest, the wall
// clock taken as read at their middle.
int64_t wall_minus_trace_us() {
  using namespace std::chrono;
  int64_t best_gap = -1, offset = 0;
  for (int i = 0; i < 5; ++i) {
    const int64_t before = now_us();
    const int64_t wall = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
    const int64_t after = now_us();
    if (best_gap < 0 || after - before < best_gap) {
      best_gap = after - before;
      offset = wall - (before + (after - before) / 2);
    }
  }
  return offset;
}

}  // namespace

int64_t unix_us_of(int64_t trace_us) {
  static const int64_t offset = wall_minus_trace_us();
  return trace_us + offset;
}

std::string Event::arg(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : args)
    if (k == key) return v;
  return fallback;
}

Event counter_event(int rank, const std::string& name, const CounterValues& values, int64_t at_us) {
  Event e;
  e.rank = rank;
  e.lane = kLaneCounter;
  e.name = name;
  e.category = kCounterCategory;
  e.begin_us = at_us;
  e.end_us = at_us;
  e.args.reserve(values.size());
  for (const auto& [series, value] : values) e.args.emplace_back(series, std::to_string(value));
  return e;
}

int64_t bytes_sent(const std::vector<Event>& events, int rank, int64_t from_us, int64_t to_us) {
  int64_t bytes = 0;
  for (const Event& e : events)
    if (e.rank == rank && e.category == "step" && e.begin_us >= from_us && e.end_us <= to_us) bytes += e.bytes;
  return bytes;
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
