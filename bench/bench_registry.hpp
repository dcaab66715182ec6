// Each benchmark file adds one subcommand to distlab-bench:
//
//   static bench::Registration reg("p2p", "point-to-point latency and bandwidth",
//                                  [](CLI::App& cmd) { ...options...; return run_function; });
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace distlab::bench {

// Adds options to `cmd` and returns what runs when the subcommand is chosen.
using Setup = std::function<std::function<int()>(CLI::App& cmd)>;

struct Benchmark {
  std::string name;
  std::string description;
  Setup setup;
};

inline std::vector<Benchmark>& registry() {
  static std::vector<Benchmark> all;
  return all;
}

struct Registration {
  Registration(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

// "1K" -> 1024, "256M" -> 268435456, "8" -> 8. Throws CLI::ValidationError.
int64_t parse_size(const std::string& text);

// The sizes a benchmark sweeps, -b MIN to -e MAX as given ("8", "1K", ...).
struct SizeSweep {
  std::string min_bytes, max_bytes;
  // Adds -b and -e to `cmd` (`what`: "buffer", "message"); a bad size, or -b
  // larger than -e, is refused when the command line is parsed, before
  // any rank starts.
  void add_flags(CLI::App& cmd, const std::string& what);
  int64_t min() const { return parse_size(min_bytes); }
  int64_t max() const { return parse_size(max_bytes); }
};
// 268435456 -> "256M"
std::string format_size(int64_t bytes);
// The middle value (the upper one of an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace distlab::bench
