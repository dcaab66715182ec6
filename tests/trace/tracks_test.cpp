// Chrome-trace files that Perfetto draws right: on every thread track the
// complete events nest or stay apart (a lane whose events overlap partly is
// written as several tracks), every arrow lands on its send or recv, and the
// file still reads back into exactly the events written, lanes included.
// The file is judged by test_support::check_tracks, which reads the JSON
// itself and sweeps each track with a stack, not by the writer's own rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "support/perfetto_tracks.hpp"
#include "trace/chrome_json.hpp"
#include "trace/merge.hpp"
#include "trace/reader.hpp"
#include "trace/tracks.hpp"

namespace distlab::trace {
namespace {

using test_support::check_tracks;

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "distlab_tracks_" + std::to_string(getpid()) + "_" + name;
}

Event span(int rank, const std::string& lane, const std::string& name, int64_t begin, int64_t end) {
  Event e;
  e.rank = rank;
  e.lane = lane;
  e.name = name;
  e.category = name;
  e.begin_us = begin;
  e.end_us = end;
  return e;
}

// One ring step as lesson 05 records it on two threads of rank 0: the recv
// from rank 3 runs 100-200, the send to rank 1 starts inside it and ends
// after it; both inside the all-reduce's span. Rank 1's recv gets the arrow.
std::vector<Event> ring_step() {
  Event all_reduce = span(0, kLaneComm, "all_reduce ring", 90, 260);
  Event recv = span(0, kLaneComm, "recv", 100, 200);
  recv.peer = 3;
  recv.flow = flow_id(3, 0, 1, 0);
  Event send = span(0, kLaneComm, "send", 150, 250);
  send.peer = 1;
  send.flow = flow_id(0, 1, 1, 0);
  Event other_recv = span(1, kLaneComm, "recv", 140, 255);
  other_recv.peer = 0;
  other_recv.flow = send.flow;
  // As a recorder sees them: in the order they end.
  return {recv, send, other_recv, all_reduce};
}

std::vector<Event> write_and_read(const std::vector<Event>& events, const std::string& path) {
  {
    ChromeJsonSink sink(path);
    for (const Event& e : events) sink.write(e);
  }
  return read_chrome_trace(path);
}

std::map<int64_t, std::string> thread_names(const std::string& path, int pid) {
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<int64_t, std::string> names;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("pid") == pid)
      names[e.at("tid").get<int64_t>()] = e.at("args").at("name");
  return names;
}

TEST(PerfettoTracks, TheCheckFindsAPartialOverlapAndAnArrowOffItsSlice) {
  // The checker itself, on hand-written files: one send that starts inside
  // a recv of the same track and ends after it, and an arrow whose slice is
  // elsewhere.
  const auto doc = nlohmann::json::parse(R"({"traceEvents":[
    {"ph":"X","pid":0,"tid":0,"name":"recv","ts":100,"dur":100,"args":{"flow":"0x1"}},
    {"ph":"X","pid":0,"tid":0,"name":"send","ts":150,"dur":100,"args":{"flow":"0x2"}},
    {"ph":"X","pid":0,"tid":0,"name":"inside","ts":110,"dur":10,"args":{}},
    {"ph":"s","pid":0,"tid":0,"id":"0x2","ts":150},
    {"ph":"f","bp":"e","pid":0,"tid":0,"id":"0x1","ts":115}]})");
  const auto report = check_tracks(doc);
  EXPECT_EQ(report.complete, 3u);
  EXPECT_EQ(report.partial_overlaps, 1u) << report.first_problem;
  EXPECT_NE(report.first_problem.find("'send'"), std::string::npos) << report.first_problem;
  // "s" sits on the send (which overlaps, but holds ts with nothing inside);
  // "f" at 115 is inside "inside", nested in the recv: misplaced.
  EXPECT_EQ(report.misplaced_flows, 1u);
  EXPECT_EQ(report.flows, 2u);
}

TEST(PerfettoTracks, PartlyOverlappingEventsOfALaneGoOnTracksOfTheirOwn) {
  const std::string path = temp_path("ring.json");
  const std::vector<Event> events = ring_step();
  const std::vector<Event> back = write_and_read(events, path);
  const auto report = check_tracks(path);
  EXPECT_EQ(report.complete, events.size());
  EXPECT_EQ(report.partial_overlaps, 0u) << report.first_problem;
  EXPECT_EQ(report.flows, 3u);  // the send's "s", both recvs' "f"
  EXPECT_EQ(report.misplaced_flows, 0u) << report.first_problem;
  // Rank 0's comm lane: the all-reduce with the recv inside on one track,
  // the send on the next one, named for its lane.
  const std::set<std::string> names = [&] {
    std::set<std::string> s;
    for (const auto& [tid, name] : thread_names(path, 0)) s.insert(name);
    return s;
  }();
  EXPECT_EQ(names, (std::set<std::string>{"comm", "comm (concurrent 1)"}));
  // Read back: the lane, not the track, as every reader shows it.
  ASSERT_EQ(back.size(), events.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].lane, events[i].lane) << i;
    EXPECT_EQ(back[i].name, events[i].name) << i;
    EXPECT_EQ(back[i].begin_us, events[i].begin_us) << i;
    EXPECT_EQ(back[i].flow, events[i].flow) << i;
  }
  std::remove(path.c_str());
}

// Lesson 15's ring sends a K block and a V block to the next rank in the
// same microsecond: the one that ends first nests in the other, over the
// other's arrow. Each send keeps its arrow on a track of its own, and so do
// two recvs whose data arrived in the same microsecond.
TEST(PerfettoTracks, TwoSendsBegunInOneMicrosecondEachKeepTheirArrow) {
  const std::string path = temp_path("same_begin.json");
  Event send_k = span(0, kLaneComm, "send", 339, 405), send_v = span(0, kLaneComm, "send", 339, 420);
  send_k.peer = send_v.peer = 1;
  send_k.flow = flow_id(0, 1, 90, 0);
  send_v.flow = flow_id(0, 1, 91, 0);
  Event recv_k = span(1, kLaneComm, "recv", 300, 430), recv_v = span(1, kLaneComm, "recv", 350, 430);
  recv_k.peer = recv_v.peer = 0;
  recv_k.flow = send_k.flow;
  recv_v.flow = send_v.flow;
  write_and_read({send_k, send_v, recv_v, recv_k}, path);
  const auto report = check_tracks(path);
  EXPECT_EQ(report.complete, 4u);
  EXPECT_EQ(report.flows, 4u);
  EXPECT_EQ(report.partial_overlaps, 0u) << report.first_problem;
  EXPECT_EQ(report.misplaced_flows, 0u) << report.first_problem;
  EXPECT_EQ(thread_names(path, 0).size(), 2u);
  EXPECT_EQ(thread_names(path, 1).size(), 2u);
  std::remove(path.c_str());
}

TEST(PerfettoTracks, MergedFilesNestToo) {
  // Two per-rank files, merged: the merge writes in begin order, not end order.
  const std::string a = temp_path("m.rank0.json"), b = temp_path("m.rank1.json"), out = temp_path("m.json");
  std::vector<Event> rank0, rank1;
  for (const Event& e : ring_step()) (e.rank == 0 ? rank0 : rank1).push_back(e);
  rank1.push_back(span(1, kLaneComm, "send", 200, 300));  // starts inside rank 1's recv
  write_and_read(rank0, a);
  write_and_read(rank1, b);
  merge_trace_files({a, b}, out);
  const auto report = check_tracks(out);
  EXPECT_EQ(report.complete, 5u);
  EXPECT_EQ(report.partial_overlaps, 0u) << report.first_problem;
  EXPECT_EQ(report.misplaced_flows, 0u) << report.first_problem;
  for (const auto& p : {a, b, out}) std::remove(p.c_str());
}

// Spans as threads record them: each of `threads` threads of one rank opens
// nested spans (a stack), and all threads write into one lane, so spans of
// different threads overlap in every way.
std::vector<Event> random_spans(std::mt19937& rng, int threads, int per_thread) {
  std::vector<Event> events;
  std::uniform_int_distribution<int64_t> gap(0, 30), length(1, 200), depth(0, 3);
  for (int t = 0; t < threads; ++t) {
    int64_t at = gap(rng);
    for (int k = 0; k < per_thread; ++k) {
      const int64_t begin = at, end = begin + length(rng);
      events.push_back(span(0, "compute", "outer", begin, end));
      int64_t inner = begin;
      for (int64_t d = depth(rng); d > 0 && inner < end; --d) {
        const int64_t b = inner + gap(rng) % std::max<int64_t>(1, end - inner);
        const int64_t e = std::min(end, b + length(rng) / 4);
        events.push_back(span(0, "compute", "inner", b, e));
        inner = e;
      }
      at = end + gap(rng);
    }
  }
  return events;
}

// Apart or nested, written out for the test (not the library's rule).
bool can_share(const Event& a, const Event& b) {
  return a.end_us <= b.begin_us || b.end_us <= a.begin_us ||
         (a.begin_us <= b.begin_us && b.end_us <= a.end_us) || (b.begin_us <= a.begin_us && a.end_us <= b.end_us);
}

TEST(PerfettoTracks, RandomThreadsInAnyOrderNestOnTheFirstTrackThatFits) {
  std::mt19937 rng(2026);
  for (int round = 0; round < 20; ++round) {
    std::vector<Event> events = random_spans(rng, 1 + round % 4, 30);
    if (round % 2 == 0) {
      std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end_us < b.end_us; });
    } else {
      std::shuffle(events.begin(), events.end(), rng);
    }
    TrackLevels levels;
    std::vector<std::vector<const Event*>> placed;
    for (const Event& e : events) {
      const int level = levels.place(e.rank, e.lane, e.begin_us, e.end_us);
      ASSERT_LE(level, static_cast<int>(placed.size()));
      // First fit: every track above it holds an event it cannot share with.
      for (int k = 0; k < level; ++k) {
        const bool blocked = std::any_of(placed[k].begin(), placed[k].end(),
                                         [&](const Event* other) { return !can_share(*other, e); });
        EXPECT_TRUE(blocked) << "round " << round << ": level " << level << " while " << k << " was free";
      }
      if (level == static_cast<int>(placed.size())) placed.emplace_back();
      for (const Event* other : placed[level])
        ASSERT_TRUE(can_share(*other, e)) << "round " << round << ": [" << e.begin_us << ", " << e.end_us
                                          << "] vs [" << other->begin_us << ", " << other->end_us << "]";
      placed[level].push_back(&e);
    }
    // And written as a file, judged by the JSON check.
    const std::string path = temp_path("random.json");
    write_and_read(events, path);
    const auto report = check_tracks(path);
    EXPECT_EQ(report.complete, events.size());
    EXPECT_EQ(report.partial_overlaps, 0u) << "round " << round << ": " << report.first_problem;
    if (round % 4 == 3) EXPECT_GT(report.tracks, 1u) << "four threads in one lane fit one track: a weak round";
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace distlab::trace
