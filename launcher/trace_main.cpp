// distlab-trace: what to do with the traces a job wrote.
//
//   distlab-trace merge -o all.json out.rank0.json out.rank1.json ...
#include <CLI/CLI.hpp>

#include <iostream>

#include "trace/merge.hpp"
#include "trace/reader.hpp"

int main(int argc, char** argv) {
  CLI::App app{"distlab-trace: tools for DistLab's Chrome-trace files"};
  app.require_subcommand(1);
  CLI::App* merge = app.add_subcommand(
      "merge", "merge the per-rank files of a multi-process job into one (for Perfetto, which opens one file)");
  std::string output;
  std::vector<std::string> inputs;
  merge->add_option("-o,--output", output, "the merged trace")->required();
  merge->add_option("inputs", inputs, "trace files, e.g. out.rank*.json")->required()->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  try {
    const size_t events = distlab::trace::merge_trace_files(inputs, output);
    std::cout << "distlab-trace: wrote " << events << " events from " << inputs.size() << " file(s) to " << output
              << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "distlab-trace: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
