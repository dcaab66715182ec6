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
    const auto report = distlab::trace::merge_trace_files(inputs, output);
    std::cout << "distlab-trace: wrote " << report.events << " events from " << inputs.size() << " file(s) to "
              << output << std::endl;
    for (const auto& [rank, offset] : report.offsets)
      if (rank != 0)
        std::cout << "distlab-trace: rank " << rank << "'s clock moved by " << offset.offset_us << " us (+- "
                  << offset.uncertainty_us << " us) onto rank 0's" << std::endl;
    if (report.clamped_flows > 0)
      std::cout << "distlab-trace: " << report.clamped_flows << " of " << report.flows
                << " recv(s) ended before their send began (clocks that disagree: run with tracing on every node "
                   "so that offsets are measured); their arrows end at the send"
                << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "distlab-trace: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
