// distlab-bench: DistLab's benchmarks. `distlab-bench --help` lists them.
#include <algorithm>
#include <iostream>

#include "bench_registry.hpp"
#include "comm/subcommand_cli.hpp"

namespace distlab::bench {

int64_t parse_size(const std::string& text) {
  if (text.empty()) throw CLI::ValidationError("size", "empty size");
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw CLI::ValidationError("size", "'" + text + "' is not a size (examples: 8, 1K, 256M, 1G)");
  }
  std::string unit = text.substr(used);
  double scale = 1;
  if (unit == "K" || unit == "k") scale = 1024;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw CLI::ValidationError("size", "unknown unit in '" + text + "' (use K, M or G)");
  if (value < 0) throw CLI::ValidationError("size", "negative size '" + text + "'");
  return static_cast<int64_t>(value * scale);
}

void SizeSweep::add_flags(CLI::App& cmd, const std::string& what) {
  cmd.add_option("-b,--minbytes", min_bytes, "smallest " + what + " (8, 1K, 1M, ...)")->capture_default_str();
  cmd.add_option("-e,--maxbytes", max_bytes, "largest " + what)->capture_default_str();
  // Checked once both are known: the sweep would otherwise print an empty table.
  cmd.parse_complete_callback([this] {
    if (min() > max())
      throw CLI::ValidationError("-b " + min_bytes + " is larger than -e " + max_bytes +
                                 ": give the smallest size to -b and the largest to -e");
  });
}

std::string format_size(int64_t bytes) {
  const char* units[] = {"", "K", "M", "G"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + units[u];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace distlab::bench

int main(int argc, char** argv) {
  using namespace distlab::bench;
  CLI::App app{"distlab-bench: DistLab's benchmarks; each prints a table"};
  app.require_subcommand(1);
  std::function<int()> chosen;
  for (auto& b : registry()) {
    CLI::App* cmd = app.add_subcommand(b.name, b.description);
    auto run = b.setup(*cmd);
    cmd->callback([&chosen, run] { chosen = run; });
  }
  if (const std::string unknown =
          distlab::comm::unknown_subcommand(app, argc, argv, "distlab-bench", "benchmark", "what each measures");
      !unknown.empty()) {
    std::cerr << unknown << std::endl;
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  try {
    return chosen();
  } catch (const std::exception& e) {
    std::cerr << "distlab-bench: " << e.what() << std::endl;
    return 1;
  }
}
