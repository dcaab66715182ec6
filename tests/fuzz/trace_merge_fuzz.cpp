// distlab-trace merge (trace/merge.hpp): up to four rank files, cut from
// the input at the separator line (fuzz_input.hpp), merged into one. A bad
// input is refused with a TraceFormatError; a merged file is read back
// whole, every event there (the round trip of nlohmann/json's fuzzers:
// what the library writes, it reads).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "trace/merge.hpp"
#include "trace/reader.hpp"

using namespace distlab::trace;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = distlab::fuzz::scratch_folder("merge");
  std::vector<std::string> inputs;
  for (const std::string& piece : distlab::fuzz::pieces(data, size, 4)) {
    inputs.push_back(dir + "/out.rank" + std::to_string(inputs.size()) + ".json");
    distlab::fuzz::write_bytes(inputs.back(), piece);
  }
  const std::string output = dir + "/merged.json";
  MergeReport report;
  try {
    report = merge_trace_files(inputs, output);
  } catch (const TraceFormatError&) {
    return 0;
  }
  TraceInfo info;
  const std::vector<Event> merged = read_chrome_trace(output, ReadLimits{}, &info);  // throws: a finding
  if (merged.size() != report.events) {
    std::fprintf(stderr, "trace_merge_fuzz: merged %zu events, read back %zu\n", report.events, merged.size());
    std::abort();
  }
  return 0;
}
