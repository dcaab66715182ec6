// distlab-trace: what to do with the traces a job wrote.
//
//   distlab-trace merge -o all.json out.rank0.json out.rank1.json ...
//   distlab-trace why flight.rank*.json          (or the directory holding them)
#include <CLI/CLI.hpp>

#include <iostream>

#include "comm/subcommand_cli.hpp"
#include "flight/why.hpp"
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
  CLI::App* why = app.add_subcommand(
      "why", "read every rank's flight recorder file (flight.rank<N>.json) and say why the job hangs or stopped");
  std::vector<std::string> dumps;
  why->add_option("files", dumps, "flight files, or directories holding them")->required();
  if (const std::string unknown =
          distlab::comm::unknown_subcommand(app, argc, argv, "distlab-trace", "tool", "what each does");
      !unknown.empty()) {
    std::cerr << unknown << std::endl;
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  if (why->parsed()) {
    // A missing or damaged file is one line of the report, never a crash;
    // the exit status is 1 when no file could be read at all.
    const distlab::flight::Diagnosis diagnosis = distlab::flight::diagnose_files(dumps);
    std::cout << distlab::flight::to_text(diagnosis) << std::flush;
    return diagnosis.summary.rfind("read 0 ", 0) == 0 ? 1 : 0;
  }
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
