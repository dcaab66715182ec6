// A real lesson, traced: lesson 05 (all-reduce, 4 ranks as threads) writes a
// Chrome trace and streams the same events live in one run. The file opens
// in the Trace panel with every send paired with its recv, and the live
// stream delivers exactly what the file holds, in the same order.
#include <gtest/gtest.h>

#include <map>

#include "live_feed.hpp"
#include "trace_loader.hpp"
#include "trace_panel.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

constexpr int kWaitMs = 120000;

std::vector<std::string> lesson_05(const std::string& trace_file, const std::string& live) {
  std::vector<std::string> argv = {VIZ_LESSON_05, "--backend", "threads", "--ranks", "4", "--mb", "0.25",
                                   "--iters", "1", "--no-steps", "--trace", trace_file};
  if (!live.empty()) {
    argv.push_back("--live");
    argv.push_back(live);
  }
  return argv;
}

TEST(LessonTrace, FileOpensWithEveryMessagePaired) {
  const std::string path = temp_path("lesson05.json");
  std::string output;
  ASSERT_EQ(run(lesson_05(path, ""), {}, &output, kWaitMs), 0) << output;
  TracePanel panel;
  panel.open_files({path});
  const TraceModel& m = panel.model();
  ASSERT_GT(m.size(), 0u);
  for (const std::string& message : panel.messages()) EXPECT_EQ(message.rfind("warning", 0), std::string::npos) << message;
  std::map<int, int> sends, recvs;
  std::map<std::string, int> algorithms;  // collective spans by name
  for (uint32_t i = 0; i < m.size(); ++i) {
    const trace::Event e = m.event(i);
    if (e.category == "send") ++sends[e.rank];
    if (e.category == "recv") ++recvs[e.rank];
    if (e.category == "collective") ++algorithms[e.name];
  }
  EXPECT_EQ(sends.size(), 4u);
  int total_sends = 0, total_recvs = 0;
  for (const auto& [rank, n] : sends) total_sends += n;
  for (const auto& [rank, n] : recvs) total_recvs += n;
  EXPECT_EQ(total_sends, total_recvs);
  EXPECT_EQ(m.flow_count(), static_cast<size_t>(total_sends));  // every message: one arrow
  std::vector<int> ranks;
  for (const auto& row : m.rows()) ranks.push_back(row.rank);
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  // Each algorithm's call shows as a span on every rank.
  for (const char* name : {"all_reduce ring", "all_reduce halving_doubling", "all_reduce reduce_broadcast"}) {
    bool found = false;
    for (const auto& [span, n] : algorithms) found |= span.rfind(name, 0) == 0 && n % 4 == 0;
    EXPECT_TRUE(found) << name;
  }
}

// Runs `argv` (which traces to `path` and streams live to `feed`), reads the
// file, and takes in as many live events as the file holds.
void run_traced_live(const std::vector<std::string>& argv, const std::string& path, LiveFeed& feed, LoadedTrace& file,
                     TraceModel& live) {
  std::string output;
  ASSERT_EQ(run(argv, {}, &output, kWaitMs), 0) << output;
  file = load_trace_file(path);
  ASSERT_GT(file.events.size(), 0u);
  EXPECT_EQ(feed.wait_for(file.events.size(), kWaitMs), file.events.size());
  feed.poll(live);
  ASSERT_EQ(live.size(), file.events.size());
}

TEST(LessonTrace, LiveStreamDeliversExactlyWhatTheFileHolds) {
  LiveFeed feed(0, "127.0.0.1");
  const std::string path = temp_path("lesson05_live.json");
  LoadedTrace file;
  TraceModel live;
  ASSERT_NO_FATAL_FAILURE(run_traced_live(lesson_05(path, "127.0.0.1:" + std::to_string(feed.port())), path, feed,
                                          file, live));
  // One recorder feeds both sinks in one order: the sequences match event
  // for event, every field.
  for (uint32_t i = 0; i < live.size(); ++i) expect_same_event(live.event(i), file.events[i]);
  EXPECT_TRUE(feed.errors().empty());
}

// The capstone (2 stages x 2 replicas, 4 thread ranks) streamed live: the
// Trace view gets all 4 ranks, the pipeline stages' lanes, DDP's buckets,
// and the events name their groups; exactly what the file holds.
TEST(LessonTrace, CapstoneStreamsItsFourRanksLive) {
  LiveFeed feed(0, "127.0.0.1");
  const std::string path = temp_path("capstone_live.json");
  const std::vector<std::string> argv = {VIZ_LESSON_11, "--backend", "threads", "--preset", "tiny", "--epochs", "1",
                                         "--batches-per-epoch", "2", "--eval-batches", "1", "--trace", path,
                                         "--live", "127.0.0.1:" + std::to_string(feed.port())};
  LoadedTrace file;
  TraceModel live;
  ASSERT_NO_FATAL_FAILURE(run_traced_live(argv, path, feed, file, live));
  std::map<int, int> per_rank;
  int stage_lane = 0, buckets = 0, grouped = 0;
  for (uint32_t i = 0; i < live.size(); ++i) {
    const trace::Event e = live.event(i);
    ++per_rank[e.rank];
    stage_lane += e.lane.rfind("stage", 0) == 0;
    buckets += e.lane == "ddp" && e.category == "bucket";
    grouped += !e.arg("group").empty();
  }
  EXPECT_EQ(per_rank.size(), 4u);
  EXPECT_GT(stage_lane, 0);
  EXPECT_GT(buckets, 0);
  EXPECT_GT(grouped, 0);
  EXPECT_TRUE(feed.errors().empty());
}

}  // namespace
}  // namespace distlab::viz
