// Programs made of tools (distlab-bench ddp, distlab-trace why), for CLI11
// (header-only, as job_cli.hpp): CLI11 answers a misspelt or missing tool
// with "A subcommand is required", which names neither what was given nor
// what there is.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace distlab::comm {

// The one line to print when argv names none of `app`'s subcommands, e.g.
// "distlab-trace: no tool 'foo'; name one of merge, why (distlab-trace
// --help says what each does)"; "" when it names one, or starts with a flag
// (--help), which CLI11 answers itself. `noun` is what a subcommand is
// called ("tool"), `help_says` what --help tells of each ("what each does").
inline std::string unknown_subcommand(const CLI::App& app, int argc, char** argv, const std::string& program,
                                      const std::string& noun, const std::string& help_says) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (!first.empty() && first[0] == '-') return "";
  std::string names;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(const CLI::App*)>())) {
    if (sub->get_name() == first) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return program + ": " + (first.empty() ? std::string() : "no " + noun + " '" + first + "'; ") + "name one of " +
         names + " (" + program + " --help says " + help_says + ")";
}

}  // namespace distlab::comm
