// trace_load_bench: how long opening a trace file takes, and how much memory.
//
//   build/viz/distlab-viz-make-trace --out /tmp/t1m.json --events 1000000
//   build/bench/trace_load_bench /tmp/t1m.json --mode viewer
//
// Modes, one per process so that the peak memory is that mode's alone:
//   stream  the library's streaming reader, events counted and dropped
//   viewer  what distlab-viz --trace does: streamed into the TraceModel, then
//           sorted, stacked and flows paired (finalize)
//   dom     the reference DOM reader (dom_reader.hpp) over the whole text:
//           what opening cost before the streaming reader
//   pieces  what the page does while a trace downloads (TraceDownload):
//           the file handed over in pieces of --piece bytes, then finalized
// Prints wall time and the process's peak resident memory (ru_maxrss), the
// same number /usr/bin/time -v reports as "Maximum resident set size".
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "trace/dom_reader.hpp"
#include "trace/reader.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  using namespace distlab;
  std::string path;
  std::string mode = "viewer";
  size_t piece = size_t{1} << 20;
  CLI::App cli{"Time and peak memory of opening a trace file"};
  cli.add_option("file", path, "Chrome trace JSON (distlab-viz-make-trace writes one)")->required();
  cli.add_option("--mode", mode, "stream, viewer, pieces or dom")
      ->check(CLI::IsMember({"stream", "viewer", "pieces", "dom"}));
  cli.add_option("--piece", piece, "bytes per piece in --mode pieces")->check(CLI::Range(size_t{1}, size_t{1} << 30));
  CLI11_PARSE(cli, argc, argv);
  try {
    const auto start = Clock::now();
    size_t events = 0;
    std::string detail;
    if (mode == "stream") {
      int64_t checksum = 0;  // touches every event so nothing is optimised away
      trace::stream_chrome_file(path, viz::kViewerLimits, [&](trace::Event& e) {
        ++events;
        checksum += e.end_us - e.begin_us + static_cast<int64_t>(e.args.size());
      });
      detail = "checksum " + std::to_string(checksum);
    } else if (mode == "viewer") {
      viz::TraceModel model;
      const viz::LoadReport report = viz::load_trace_into(path, model);
      const double read_ms = ms_since(start);
      model.finalize();
      events = model.size();
      detail = "read " + std::to_string(static_cast<int>(read_ms)) + " ms, finalize " +
               std::to_string(static_cast<int>(ms_since(start) - read_ms)) + " ms; " +
               std::to_string(model.rows().size()) + " rows, " + std::to_string(model.flow_count()) + " arrows" +
               (report.warnings.empty() ? "" : "; " + report.warnings.front());
    } else if (mode == "pieces") {
      viz::TraceDownload download({path});
      std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
      if (!file) throw std::runtime_error("cannot open " + path);
      std::fseek(file.get(), 0, SEEK_END);
      download.begin_file(std::ftell(file.get()));
      std::rewind(file.get());
      for (size_t n = 0; (n = std::fread(download.space(piece), 1, piece, file.get())) > 0;) download.commit(n);
      download.end_file();
      const double read_ms = ms_since(start);
      const std::unique_ptr<viz::OpenedTraces> opened = download.opened();  // finalized
      if (opened == nullptr) throw std::runtime_error("the pieces were not read whole");
      events = opened->model.size();
      detail = "read " + std::to_string(static_cast<int>(read_ms)) + " ms, finalize " +
               std::to_string(static_cast<int>(ms_since(start) - read_ms)) + " ms";
    } else {
      std::ifstream in(path, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      events = trace::parse_chrome_trace_dom(text.str(), viz::kViewerLimits).size();
    }
    const double ms = ms_since(start);
    std::printf("%-6s %zu events in %.0f ms, peak RSS %.0f MB (%s)\n", mode.c_str(), events, ms, peak_rss_mb(),
                detail.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_load_bench: %s\n", e.what());
    std::printf("%-6s refused after peak RSS %.0f MB\n", mode.c_str(), peak_rss_mb());
    return 1;
  }
  return 0;
}
