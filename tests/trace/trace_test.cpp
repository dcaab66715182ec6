// The trace layer: events written to Chrome JSON read back whole, flows pair
// up, the live stream delivers every event, and bad input is refused with a
// message instead of a crash.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "trace/chrome_json.hpp"
#include "trace/config.hpp"
#include "trace/live_stream.hpp"
#include "trace/merge.hpp"
#include "trace/reader.hpp"

namespace distlab::trace {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "distlab_" + std::to_string(getpid()) + "_" + name;
}

// A small job's worth of events: two ranks, a send->recv pair, a compute box.
std::vector<Event> sample_events() {
  std::vector<Event> events;
  Event send{0, kLaneComm, "send", "send", 100, 150, 4096, 1, flow_id(0, 1, 7, 0), {{"tag", "7"}}};
  Event recv{1, kLaneComm, "recv", "recv", 110, 160, 4096, 0, flow_id(0, 1, 7, 0), {{"tag", "7"}}};
  Event fwd{1, kLaneCompute, "fwd mb 0", "fwd", 0, 90, 0, -1, 0, {{"microbatch", "0"}, {"quote", "a \"b\"\n"}}};
  events.push_back(send);
  events.push_back(recv);
  events.push_back(fwd);
  return events;
}

void expect_same(const Event& a, const Event& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.lane, b.lane);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.category, b.category);
  EXPECT_EQ(a.begin_us, b.begin_us);
  EXPECT_EQ(a.end_us, b.end_us);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.peer, b.peer);
  EXPECT_EQ(a.flow, b.flow);
  EXPECT_EQ(a.args, b.args);
}

TEST(FlowId, BothSidesAgreeAndMessagesDiffer) {
  EXPECT_EQ(flow_id(2, 5, 3, 9), flow_id(2, 5, 3, 9));
  EXPECT_NE(flow_id(2, 5, 3, 9), flow_id(5, 2, 3, 9));
  EXPECT_NE(flow_id(2, 5, 3, 9), flow_id(2, 5, 3, 10));
  EXPECT_NE(flow_id(2, 5, 3, 9), flow_id(2, 5, 4, 9));
  EXPECT_NE(flow_id(0, 0, 0, 0), 0u);
}

TEST(ChromeJson, RoundTripKeepsEveryField) {
  const std::string path = temp_path("roundtrip.json");
  auto events = sample_events();
  {
    ChromeJsonSink sink(path);
    for (const auto& e : events) sink.write(e);
  }
  auto back = read_chrome_trace(path);
  ASSERT_EQ(back.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) expect_same(back[i], events[i]);
  std::remove(path.c_str());
}

TEST(ChromeJson, IsValidChromeTraceWithLanesAndPairedFlows) {
  const std::string path = temp_path("chrome.json");
  {
    ChromeJsonSink sink(path);
    for (const auto& e : sample_events()) sink.write(e);
  }
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);  // the whole file is strict JSON
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::string, std::vector<nlohmann::json>> flows;
  int complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name")
      thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name");
    if (ph == "X") {
      ++complete;
      for (const char* field : {"pid", "tid", "name", "cat", "ts", "dur", "args"}) EXPECT_TRUE(e.contains(field)) << field;
      // pid = rank, tid = a lane named by metadata.
      auto lane = thread_names.find({e.at("pid").get<int>(), e.at("tid").get<int>()});
      ASSERT_NE(lane, thread_names.end());
      EXPECT_EQ(lane->second, e.at("args").at("lane"));
    }
    if (ph == "s" || ph == "f") flows[e.at("id")].push_back(e);
  }
  EXPECT_EQ(complete, 3);
  ASSERT_EQ(flows.size(), 1u);
  const auto& pair = flows.begin()->second;
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_EQ(pair[0].at("ph"), "s");
  EXPECT_EQ(pair[0].at("pid"), 0);
  EXPECT_EQ(pair[1].at("ph"), "f");
  EXPECT_EQ(pair[1].at("pid"), 1);
  EXPECT_EQ(pair[1].at("bp"), "e");
  std::remove(path.c_str());
}

TEST(ChromeJson, MakesTheFoldersOfItsPath) {
  const std::string folder = temp_path("made") + "/a/b";
  const std::string path = folder + "/t.json";
  {
    ChromeJsonSink sink(path);
    for (const auto& e : sample_events()) sink.write(e);
  }
  EXPECT_EQ(read_chrome_trace(path).size(), sample_events().size());
  // A folder that cannot be made (its parent is a file) is named in the error.
  try {
    ChromeJsonSink sink(path + "/under_a_file.json");
    ADD_FAILURE() << "a trace under a file was opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("under_a_file.json"), std::string::npos) << e.what();
  }
}

TEST(ChromeJson, TruncatedFileGivesAClearMessage) {
  const std::string path = temp_path("truncated.json");
  {
    ChromeJsonSink sink(path);
    for (const auto& e : sample_events()) sink.write(e);
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  for (size_t cut : {size_t{0}, size_t{5}, text.size() / 2, text.size() - 4}) {
    try {
      parse_chrome_trace(text.substr(0, cut));
      ADD_FAILURE() << "a trace cut at byte " << cut << " was accepted";
    } catch (const TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find("malformed trace JSON"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
}

TEST(ChromeJson, ReadsForeignTracesWithThreadNames) {
  // A bare array, as other tools write it: lanes come from metadata.
  const std::string text = R"([
    {"ph":"M","name":"thread_name","pid":3,"tid":9,"args":{"name":"stage0"}},
    {"ph":"X","pid":3,"tid":9,"name":"f","cat":"fwd","ts":1.5,"dur":2,"args":{"mb":1}},
    {"ph":"B","pid":3,"tid":9,"name":"ignored","ts":1}
  ])";
  auto events = parse_chrome_trace(text);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].lane, "stage0");
  EXPECT_EQ(events[0].rank, 3);
  EXPECT_EQ(events[0].begin_us, 1);
  EXPECT_EQ(events[0].arg("mb"), "1");
}

TEST(ChromeJson, RefusesWhatIsNotATrace) {
  EXPECT_THROW(parse_chrome_trace("42"), TraceFormatError);
  EXPECT_THROW(parse_chrome_trace("{\"traceEvents\":[{\"ph\":\"X\",\"ts\":\"soon\"}]}"), TraceFormatError);
  EXPECT_THROW(read_chrome_trace(temp_path("does_not_exist.json")), TraceFormatError);
  ReadLimits small;
  small.max_events = 2;
  std::string three = "[" + event_to_json(sample_events()[0], 0) + "," + event_to_json(sample_events()[1], 0) + "," +
                      event_to_json(sample_events()[2], 0) + "]";
  EXPECT_THROW(parse_chrome_trace(three, small), TraceFormatError);
  EXPECT_EQ(parse_chrome_trace(three).size(), 3u);
}

TEST(ChromeJson, RefusesHostileNumbers) {
  // Each must be a TraceFormatError (never undefined behaviour or another
  // exception type that a reader thread would not expect).
  for (const char* line : {
           R"({"ph":"X","pid":0,"ts":4e54,"dur":1})",
           R"({"ph":"X","pid":0,"ts":-4e54,"dur":1})",
           R"({"ph":"X","pid":0,"ts":9223372036854775807,"dur":9223372036854775807})",
           R"({"ph":"X","pid":0,"ts":1,"dur":18446744073709551615})",
           R"({"ph":"X","pid":0,"ts":1,"dur":1,"args":{"flow":"not-hex"}})",
           R"({"ph":"X","pid":0,"ts":1,"dur":1,"args":{"flow":"0x1ffffffffffffffffffff"}})",
           R"({"ph":"X","pid":"zero","ts":1,"dur":1})",
           R"({"ph":"X","pid":0,"ts":[1],"dur":1})",
       }) {
    EXPECT_THROW(parse_event_line(line), TraceFormatError) << line;
    EXPECT_THROW(parse_chrome_trace(std::string("[") + line + "]"), TraceFormatError) << line;
  }
  // Large but sane values still read.
  Event e = parse_event_line(R"({"ph":"X","pid":2,"ts":1e15,"dur":5,"args":{"flow":"0xffffffffffffffff"}})");
  EXPECT_EQ(e.begin_us, 1000000000000000);
  EXPECT_EQ(e.end_us, 1000000000000005);
  EXPECT_EQ(e.flow, 0xffffffffffffffffULL);
}

TEST(Merge, PerRankFilesBecomeOneTraceWithTheirFlowsPaired) {
  // Each rank's process writes its own file; the send is in one, its recv
  // in the other.
  auto events = sample_events();
  const std::string rank0 = temp_path("m.rank0.json"), rank1 = temp_path("m.rank1.json"), all = temp_path("m.json");
  {
    ChromeJsonSink a(rank0), b(rank1);
    for (const auto& e : events) (e.rank == 0 ? a : b).write(e);
  }
  EXPECT_EQ(merge_trace_files({rank1, rank0}, all).events, events.size());
  auto merged = read_chrome_trace(all);
  ASSERT_EQ(merged.size(), events.size());
  for (size_t i = 1; i < merged.size(); ++i) EXPECT_LE(merged[i - 1].begin_us, merged[i].begin_us);
  std::ifstream in(all);
  auto doc = nlohmann::json::parse(in);
  std::map<std::string, std::set<std::string>> flow_phases;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "f") flow_phases[e["id"]].insert(e["ph"].get<std::string>());
  ASSERT_EQ(flow_phases.size(), 1u);
  EXPECT_EQ(flow_phases.begin()->second, (std::set<std::string>{"s", "f"}));
  EXPECT_THROW(merge_trace_files({rank0, temp_path("missing.json")}, all), TraceFormatError);
  for (const auto& path : {rank0, rank1, all}) std::remove(path.c_str());
}

TEST(Recorder, SpanRecordsOnlyWhenEnabled) {
  Recorder recorder;
  { Span span(&recorder, 0, kLaneComm, "idle", "send"); }
  auto memory = std::make_shared<MemorySink>();
  recorder.add_sink(memory);
  {
    Span span(&recorder, 2, kLaneComm, "send", "send");
    span.set_peer(3).set_bytes(12).arg("tag", 5).arg("algorithm", "ring");
  }
  { Span null_span(nullptr, 0, kLaneComm, "nothing", "send"); }
  auto events = memory->events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 2);
  EXPECT_EQ(events[0].peer, 3);
  EXPECT_EQ(events[0].bytes, 12);
  EXPECT_EQ(events[0].arg("tag"), "5");
  EXPECT_EQ(events[0].arg("algorithm"), "ring");
  EXPECT_LE(events[0].begin_us, events[0].end_us);
}

TEST(Config, TraceFileForEachProcess) {
  EXPECT_EQ(trace_file_for("out.json", 3, false), "out.json");
  EXPECT_EQ(trace_file_for("out.json", 3, true), "out.rank3.json");
  EXPECT_EQ(trace_file_for("dir.v1/out", 2, true), "dir.v1/out.rank2");
  EXPECT_EQ(trace_file_for("t_{rank}.json", 5, false), "t_5.json");
}

TEST(LiveStream, EveryEventArrivesInOrder) {
  LiveReceiver receiver;  // loopback, a free port
  const int kRanks = 3, kPerRank = 500;
  {
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        LiveSink sink("127.0.0.1:" + std::to_string(receiver.port()));
        for (int i = 0; i < kPerRank; ++i)
          sink.write(Event{r, kLaneComm, "e", "send", i, i + 1, i, (r + 1) % kRanks, 0, {{"i", std::to_string(i)}}});
        sink.flush();
        EXPECT_EQ(sink.dropped(), 0u);
      });
    }
    for (auto& t : ranks) t.join();
  }
  ASSERT_EQ(receiver.wait_for(kRanks * kPerRank, 10000), uint64_t(kRanks * kPerRank));
  auto events = receiver.drain();
  std::vector<int> next(kRanks, 0);
  for (const auto& e : events) {
    ASSERT_GE(e.rank, 0);
    ASSERT_LT(e.rank, kRanks);
    EXPECT_EQ(e.begin_us, next[e.rank]) << "rank " << e.rank << " out of order";
    EXPECT_EQ(e.arg("i"), std::to_string(next[e.rank]));
    ++next[e.rank];
  }
  EXPECT_TRUE(receiver.errors().empty());
}

TEST(LiveStream, GarbageClosesTheConnectionWithAMessage) {
  LiveReceiver receiver;
  // A raw client that skips the hello.
  LiveSink good("127.0.0.1:" + std::to_string(receiver.port()));
  good.write(sample_events()[0]);
  good.flush();
  ASSERT_EQ(receiver.wait_for(1, 5000), 1u);
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(receiver.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string junk(200000, 'x');  // no newline, no hello
    (void)!::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    close(fd);
  }
  for (int i = 0; i < 100 && receiver.errors().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_FALSE(receiver.errors().empty());
  EXPECT_EQ(receiver.total(), 1u);
}

TEST(LiveStream, NoListenerDropsWithoutBlocking) {
  int unused_port;
  { LiveReceiver probe; unused_port = probe.port(); }  // closed again: nobody listens
  LiveSink sink("127.0.0.1:" + std::to_string(unused_port));
  sink.write(sample_events()[0]);
  sink.flush();
  EXPECT_EQ(sink.dropped(), 1u);
  EXPECT_THROW(LiveSink("nonsense"), std::invalid_argument);
}

// A send on rank 0 and its recv on rank 1, whose clock is 1000 us behind:
// in raw times the recv ends (900) before the send begins (1000).
std::pair<std::string, std::string> skewed_files(const std::string& name, bool with_offset) {
  const std::string rank0 = temp_path(name + ".rank0.json"), rank1 = temp_path(name + ".rank1.json");
  ChromeJsonSink a(rank0), b(rank1);
  if (with_offset) b.write_clock_offset(1, ClockOffset{1000, 5});
  a.write(Event{0, kLaneComm, "send", "send", 1000, 1100, 64, 1, flow_id(0, 1, 0, 0), {}});
  b.write(Event{1, kLaneComm, "recv", "recv", 500, 900, 64, 0, flow_id(0, 1, 0, 0), {}});
  return {rank0, rank1};
}

// ts of the "s" and "f" events of each flow id in a Chrome trace file.
std::map<std::string, std::pair<int64_t, int64_t>> flow_times(const std::string& path) {
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);
  std::map<std::string, std::pair<int64_t, int64_t>> times;
  for (const auto& e : doc["traceEvents"]) {
    if (e.at("ph") == "s") times[e.at("id")].first = e.at("ts").get<int64_t>();
    if (e.at("ph") == "f") times[e.at("id")].second = e.at("ts").get<int64_t>();
  }
  return times;
}

TEST(Merge, ArrowsNeverGoBackwardsAndClockOffsetsAreApplied) {
  const std::string all = temp_path("skew.json");
  {
    // No offset known: the arrow ends at the send's begin, and is counted.
    const auto [rank0, rank1] = skewed_files("noofs", false);
    const MergeReport report = merge_trace_files({rank0, rank1}, all);
    EXPECT_EQ(report.flows, 1u);
    EXPECT_EQ(report.clamped_flows, 1u);
    const auto times = flow_times(all);
    ASSERT_EQ(times.size(), 1u);
    EXPECT_EQ(times.begin()->second.first, 1000);
    EXPECT_EQ(times.begin()->second.second, 1000);
  }
  {
    // Rank 1's offset (+1000 us) moves its recv to 1500..1900 on rank 0's
    // clock: the arrow lands at the recv's end, when the data arrived.
    const auto [rank0, rank1] = skewed_files("ofs", true);
    const MergeReport report = merge_trace_files({rank0, rank1}, all);
    EXPECT_EQ(report.clamped_flows, 0u);
    ASSERT_EQ(report.offsets.count(1), 1u);
    EXPECT_EQ(report.offsets.at(1).offset_us, 1000);
    const auto times = flow_times(all);
    EXPECT_EQ(times.begin()->second.first, 1000);
    EXPECT_EQ(times.begin()->second.second, 1900);
    TraceInfo info;
    const auto merged = read_chrome_trace(all, ReadLimits{}, &info);
    ASSERT_EQ(merged.size(), 2u);
    EXPECT_EQ(merged[1].rank, 1);
    EXPECT_EQ(merged[1].begin_us, 1500);
    EXPECT_EQ(merged[1].end_us, 1900);
    EXPECT_TRUE(info.clock_offsets.empty());  // applied once, not written again
  }
}

TEST(ChromeJson, ARecvsArrowEndsWhenTheDataArrived) {
  // Both ranks in one process share one clock: the recv was posted (500)
  // before the send began (1000) and finished after it (1300). The arrow
  // ends at 1300, not at the recv's start or middle (both before the send).
  const std::string path = temp_path("arrival.json");
  {
    ChromeJsonSink sink(path);
    sink.write(Event{1, kLaneComm, "recv", "recv", 500, 1300, 64, 0, flow_id(0, 1, 0, 0), {}});
    sink.write(Event{0, kLaneComm, "send", "send", 1000, 1100, 64, 1, flow_id(0, 1, 0, 0), {}});
  }
  const auto times = flow_times(path);
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times.begin()->second.first, 1000);
  EXPECT_EQ(times.begin()->second.second, 1300);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace distlab::trace
