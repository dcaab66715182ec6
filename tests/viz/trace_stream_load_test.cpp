// Opening files straight into the model (load_trace_into, what the panel
// does): the same events as reading them into a vector first; a file that
// fails half-way, or is over the limits, leaves the model as it was; clock
// offsets move their rank; arrows never end before they start. Files read
// as they download (TraceDownload, the page's fetch): the model open_traces
// makes from the same files, or nothing when a file was not read whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "synthetic_trace.hpp"
#include "trace/chrome_json.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

std::string sample_file(const std::string& name, int64_t events) {
  SyntheticTraceOptions o;
  o.events = events;
  const std::string path = temp_path(name);
  write_with_library(path, make_synthetic_trace(o));
  return path;
}

void expect_same_model(const TraceModel& a, const TraceModel& b) {
  ASSERT_EQ(a.size(), b.size());
  for (uint32_t i = 0; i < a.size(); ++i) expect_same_event(a.event(i), b.event(i));
  EXPECT_EQ(a.rows().size(), b.rows().size());
  EXPECT_EQ(a.flow_count(), b.flow_count());
  EXPECT_EQ(a.origin_us(), b.origin_us());
  EXPECT_EQ(a.end_us(), b.end_us());
}

TEST(StreamLoad, IntoTheModelIsTheSameAsThroughAVector) {
  const std::string path = sample_file("into.json", 5000);
  TraceModel streamed;
  const LoadReport report = load_trace_into(path, streamed);
  EXPECT_EQ(report.events, 5000u);
  EXPECT_TRUE(report.warnings.empty());
  streamed.finalize();
  TraceModel reference;
  reference.add(load_trace_file(path).events);
  reference.finalize();
  expect_same_model(streamed, reference);
}

TEST(StreamLoad, AFileThatFailsLeavesTheModelAsItWas) {
  const std::string good = sample_file("good.json", 800);
  TraceModel model;
  load_trace_into(good, model);
  TraceModel before;
  load_trace_into(good, before);

  // Valid events, then a complete line with a bad field: the whole-file pass
  // fails after ~400 events and so does the line-by-line recovery.
  std::string text = read_text(sample_file("bad_src.json", 800));
  const size_t middle = text.find("{\"ph\":\"X\"", text.size() / 2);
  text.insert(middle, "{\"ph\":\"X\",\"pid\":\"abc\",\"tid\":0,\"name\":\"x\",\"ts\":1,\"dur\":1,\"args\":{\"lane\":\"new lane\"}},\n");
  const std::string bad = temp_path("bad.json");
  write_text(bad, text);
  EXPECT_THROW(load_trace_into(bad, model), trace::TraceFormatError);
  model.finalize();
  before.finalize();
  expect_same_model(model, before);

  // Over the event limit: refused with the limit named, model unchanged.
  try {
    load_trace_into(sample_file("many.json", 3000), model, trace::ReadLimits{int64_t{1} << 30, 1000});
    ADD_FAILURE() << "3000 events read under a limit of 1000";
  } catch (const trace::TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1000 events"), std::string::npos) << e.what();
  }
  model.finalize();
  expect_same_model(model, before);
}

TEST(StreamLoad, ACutShortFileIsRecoveredOnceNotTwice) {
  const std::string path = sample_file("whole.json", 1000);
  const std::string text = read_text(path);
  const std::string cut = temp_path("cut_into.json");
  write_text(cut, text.substr(0, text.size() * 2 / 3));
  TraceModel model;
  const LoadReport report = load_trace_into(cut, model);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("cut short"), std::string::npos);
  const LoadedTrace reference = load_trace_file(cut);
  ASSERT_EQ(model.size(), reference.events.size());
  for (uint32_t i = 0; i < model.size(); ++i) expect_same_event(model.event(i), reference.events[i]);
}

TEST(StreamLoad, ClockOffsetsMoveTheirRankAndArrowsNeverGoBackwards) {
  // Rank 1's clock is 1000 us behind rank 0's: raw, its recv (500..900)
  // ends before the send (1000..1100) begins.
  const uint64_t flow = trace::flow_id(0, 1, 0, 0);
  const trace::Event send{0, trace::kLaneComm, "send", "send", 1000, 1100, 64, 1, flow, {}};
  const trace::Event recv{1, trace::kLaneComm, "recv", "recv", 500, 900, 64, 0, flow, {}};
  {
    TraceModel raw;
    raw.add({send, recv});
    raw.finalize();
    ASSERT_EQ(raw.flow_bundles().size(), 1u);
    const FlowBundle& b = raw.flow_bundles()[0];
    EXPECT_EQ(raw.arrival_us(b.links[0]), 1000);  // at the send, not 100 us before it
    EXPECT_EQ(raw.clamped_flow_count(), 1u);
    EXPECT_LE(b.left_us[0], b.right_us[0]);
  }
  const std::string path = temp_path("offset.json");
  {
    trace::ChromeJsonSink sink(path);
    sink.write_clock_offset(1, trace::ClockOffset{1000, 3});
    sink.write(send);
    sink.write(recv);
  }
  TraceModel model;
  const LoadReport report = load_trace_into(path, model);
  EXPECT_EQ(report.info.clock_offsets.at(1).offset_us, 1000);
  model.finalize();
  ASSERT_EQ(model.size(), 2u);
  EXPECT_EQ(model.record(0).begin_us, 1000);  // rank 0 stays
  EXPECT_EQ(model.record(1).begin_us, 1500);
  EXPECT_EQ(model.record(1).end_us, 1900);
  EXPECT_EQ(model.clamped_flow_count(), 0u);
  EXPECT_EQ(model.arrival_us(model.flow_bundles()[0].links[0]), 1900);
  const LoadedTrace loaded = load_trace_file(path);
  EXPECT_EQ(loaded.events[1].begin_us, 1500);
}

// `paths` downloaded into a TraceDownload in pieces of random sizes (up to
// `largest` bytes), each file's bytes read from disk.
std::unique_ptr<OpenedTraces> download(const std::vector<std::string>& paths, size_t largest, unsigned seed) {
  TraceDownload download(paths);
  std::mt19937 rng(seed);
  for (const std::string& path : paths) {
    const std::string text = read_text(path);
    download.begin_file(static_cast<int64_t>(text.size()));
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(1 + rng() % largest, text.size() - at);
      std::copy(text.data() + at, text.data() + at + n, download.space(n));
      download.commit(n);
      at += n;
    }
    download.end_file();
  }
  return download.opened();
}

TEST(TraceDownload, FilesReadAsTheyArriveAreTheModelOpenTracesMakes) {
  // Two ranks' files, rank 1's clock 1000 us behind: offsets and arrows
  // across the files as open_traces gives them.
  SyntheticTraceOptions o;
  o.events = 3000;
  const std::vector<trace::Event> events = make_synthetic_trace(o);
  const std::vector<std::string> paths = {temp_path("dl.rank0.json"), temp_path("dl.rank1.json")};
  {
    trace::ChromeJsonSink rank0(paths[0]);
    trace::ChromeJsonSink rank1(paths[1]);
    rank1.write_clock_offset(1, trace::ClockOffset{1000, 3});
    for (const trace::Event& e : events) (e.rank == 1 ? rank1 : rank0).write(e);
  }
  const OpenedTraces reference = open_traces(paths);
  ASSERT_GT(reference.model.flow_count(), 0u);
  for (size_t largest : {size_t{1}, size_t{100}, size_t{1} << 16}) {
    const std::unique_ptr<OpenedTraces> got = download(paths, largest, 11);
    ASSERT_NE(got, nullptr) << "pieces up to " << largest;
    EXPECT_EQ(got->paths, paths);
    expect_same_model(got->model, reference.model);
    EXPECT_EQ(got->model.clamped_flow_count(), reference.model.clamped_flow_count());
    ASSERT_EQ(got->clock_offsets.size(), 1u);
    EXPECT_EQ(got->clock_offsets.at(1).offset_us, 1000);
    EXPECT_TRUE(got->warnings.empty());
  }
}

TEST(TraceDownload, AFileNotReadWholeLeavesItToTheUsualOpen) {
  const std::string whole = sample_file("dl_whole.json", 500);
  const std::string text = read_text(whole);
  const std::string cut = temp_path("dl_cut.json");
  write_text(cut, text.substr(0, text.size() / 2));
  const std::string empty = temp_path("dl_empty.json");
  write_text(empty, "{\"traceEvents\":[]}");
  const std::string bad = temp_path("dl_bad.json");
  write_text(bad, "[{\"ph\":\"X\",\"pid\":\"abc\"}]");
  // Cut short (the usual open recovers its complete lines, with a warning),
  // no events (a warning), a bad field (an error): each its own message.
  for (const std::string& other : {cut, empty, bad}) {
    EXPECT_EQ(download({whole, other}, 4096, 12), nullptr) << other;
    EXPECT_EQ(download({other, whole}, 4096, 13), nullptr) << other;
  }
  EXPECT_NE(download({whole}, 4096, 14), nullptr);
  // Fewer files than paths: not the set asked for.
  TraceDownload short_set({whole, whole});
  short_set.begin_file();
  std::copy(text.begin(), text.end(), short_set.space(text.size()));
  short_set.commit(text.size());
  short_set.end_file();
  EXPECT_EQ(short_set.opened(), nullptr);
}

// The largest offset the reader takes (under 2^62) moves an event exactly
// in the loaded events and to the end of the model's range in the viewer,
// never wrapping (-fsanitize=undefined would stop on a wrap).
TEST(StreamLoad, TheLargestOffsetMovesExactlyOrToTheEndOfTheRangeNeverWraps) {
  const int64_t far = (int64_t{1} << 62) - 1;
  const trace::Event event{1, trace::kLaneComm, "recv", "recv", 500, 900, 64, 0, 0, {}};
  const std::string path = temp_path("far_offset.json");
  {
    trace::ChromeJsonSink sink(path);
    sink.write_clock_offset(1, trace::ClockOffset{far, 3});
    sink.write(event);
  }
  const LoadedTrace loaded = load_trace_file(path);
  ASSERT_EQ(loaded.events.size(), 1u);
  EXPECT_EQ(loaded.events[0].begin_us, far + 500);
  EXPECT_EQ(loaded.events[0].end_us, far + 900);
  TraceModel model;
  load_trace_into(path, model);
  model.finalize();
  ASSERT_EQ(model.size(), 1u);
  EXPECT_EQ(model.record(0).begin_us, kMaxAbsTimeUs);
  EXPECT_EQ(model.record(0).end_us, kMaxAbsTimeUs);
}

}  // namespace
}  // namespace distlab::viz
