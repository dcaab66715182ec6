// Trace files written by the library open in the visualizer whole; files
// cut short open up to their last complete event with a warning; damaged or
// foreign input is refused with a message naming the file, never a crash.
#include <gtest/gtest.h>

#include <algorithm>

#include "synthetic_trace.hpp"
#include "trace/config.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"
#include "trace_panel.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

std::vector<trace::Event> sample(int64_t n, int ranks = 4) {
  SyntheticTraceOptions o;
  o.events = n;
  o.ranks = ranks;
  auto events = make_synthetic_trace(o);
  // Text that needs escaping survives too.
  events[1].args.emplace_back("note", "quote \" backslash \\ newline \n tab \t");
  events[2].name = "unicode \xc3\xa9t\xc3\xa9";
  return events;
}

TEST(TraceImport, FileWrittenByTheLibraryReadsBackEventForEvent) {
  const auto events = sample(600);
  const std::string path = temp_path("roundtrip.json");
  write_with_library(path, events);
  const LoadedTrace loaded = load_trace_file(path);
  EXPECT_TRUE(loaded.warnings.empty());
  ASSERT_EQ(loaded.events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) expect_same_event(loaded.events[i], events[i]);

  // And through the model the panel shows.
  TracePanel panel;
  panel.open_files({path});
  const TraceModel& m = panel.model();
  ASSERT_EQ(m.size(), events.size());
  for (uint32_t i = 0; i < m.size(); ++i) expect_same_event(m.event(i), events[i]);
}

TEST(TraceImport, OneFilePerRankOpensAsOneJob) {
  // A multi-process job: each rank writes its own file (trace_file_for).
  const auto events = sample(800, 3);
  const std::string pattern = temp_path("job.json");
  std::vector<std::string> paths;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<trace::Event> mine;
    std::copy_if(events.begin(), events.end(), std::back_inserter(mine),
                 [rank](const trace::Event& e) { return e.rank == rank; });
    paths.push_back(trace::trace_file_for(pattern, rank, /*several_processes=*/true));
    write_with_library(paths.back(), mine);
  }
  TracePanel panel;
  panel.open_files(paths);
  EXPECT_EQ(panel.model().size(), events.size());
  EXPECT_EQ(panel.model().rows().size(), 6u);  // 3 ranks x (compute, comm)
  // Arrows pair sends and recvs written to different files.
  TraceModel reference;
  reference.add(events);
  reference.finalize();
  EXPECT_EQ(panel.model().flow_count(), reference.flow_count());
  EXPECT_GT(reference.flow_count(), 0u);
}

TEST(TraceImport, CutShortFileReadsEveryCompleteLine) {
  const auto events = sample(300);
  const std::string path = temp_path("whole.json");
  write_with_library(path, events);
  const std::string text = read_text(path);
  for (double fraction : {0.2, 0.5, 0.77, 0.999}) {
    const size_t cut = static_cast<size_t>(text.size() * fraction);
    const std::string cut_path = temp_path("cut.json");
    write_text(cut_path, text.substr(0, cut));
    // Reference: "X" lines that end (with their comma or newline) before the cut.
    size_t complete = 0;
    for (size_t at = text.find("{\"ph\":\"X\""); at != std::string::npos && at < cut;
         at = text.find("{\"ph\":\"X\"", at + 1)) {
      const size_t line_end = text.find('\n', at);
      if (line_end <= cut || text.find("}}", at) + 2 <= cut) ++complete;
    }
    const LoadedTrace loaded = load_trace_file(cut_path);
    ASSERT_EQ(loaded.events.size(), complete) << "cut at " << cut;
    for (size_t i = 0; i < complete; ++i) expect_same_event(loaded.events[i], events[i]);
    ASSERT_EQ(loaded.warnings.size(), 1u);
    EXPECT_NE(loaded.warnings[0].find("cut short"), std::string::npos) << loaded.warnings[0];
    EXPECT_NE(loaded.warnings[0].find(cut_path), std::string::npos);
  }
}

TEST(TraceImport, DamagedOrForeignInputIsRefusedWithTheFileNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"garbage", "\x01\x02 not json at all \xff\xfe"},
      {"open brace", "{"},
      {"wrong type", "{\"traceEvents\": 42}"},
      {"number", "12345"},
      {"bad field", "[{\"ph\":\"X\",\"pid\":\"abc\",\"ts\":1,\"dur\":1}]"},
      {"bad flow", "[{\"ph\":\"X\",\"pid\":0,\"ts\":1,\"dur\":1,\"args\":{\"flow\":\"zz\"}}]"},
      {"nested", std::string(100000, '[')},
  };
  for (const auto& [name, text] : cases) {
    const std::string path = temp_path("bad_" + std::to_string(&name - &cases[0].first) + ".json");
    write_text(path, text);
    try {
      const LoadedTrace loaded = load_trace_file(path);
      // A few are valid JSON with no events: shown empty, with a warning.
      EXPECT_TRUE(loaded.events.empty()) << name;
      EXPECT_FALSE(loaded.warnings.empty()) << name;
    } catch (const trace::TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << name << ": " << e.what();
    }
  }
  EXPECT_THROW(load_trace_file(temp_path("does_not_exist.json")), trace::TraceFormatError);
  EXPECT_THROW(load_trace_file(::testing::TempDir()), trace::TraceFormatError);  // a folder
}

TEST(TraceImport, LimitsAreEnforcedBeforeMemoryRunsOut) {
  const auto events = sample(100);
  const std::string path = temp_path("limits.json");
  write_with_library(path, events);
  trace::ReadLimits few_events{int64_t{1} << 30, 10};
  EXPECT_THROW(load_trace_file(path, few_events), trace::TraceFormatError);
  trace::ReadLimits few_bytes{1000, 1000};
  try {
    load_trace_file(path, few_bytes);
    FAIL() << "a file over the byte limit was read";
  } catch (const trace::TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
  }
}

TEST(TraceImport, PanelKeepsWorkingAfterARefusedFile) {
  const std::string good = temp_path("good.json");
  write_with_library(good, sample(50));
  const std::string bad = temp_path("bad.json");
  write_text(bad, "{\"traceEvents\":[{\"ph\":\"X\", oops");
  TracePanel panel;
  panel.open_files({good});
  EXPECT_THROW(panel.open_files({bad}), trace::TraceFormatError);
  EXPECT_EQ(panel.model().size(), 50u);  // what was shown stays shown
}

}  // namespace
}  // namespace distlab::viz
