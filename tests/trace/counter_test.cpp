// Counter samples: recorded through the Recorder, written as Chrome "C"
// events with numeric args, and read back by both readers (the streaming
// one and the DOM reference) into the events that were written, alone or
// between "X" events.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "trace/chrome_json.hpp"
#include "trace/dom_reader.hpp"
#include "trace/live_stream.hpp"
#include "trace/merge.hpp"
#include "trace/reader.hpp"

namespace distlab::trace {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "distlab_counter_" + std::to_string(getpid()) + "_" + name;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A rank's memory, in the order a caller lists it (not key order), with
// values past 2^31 and 2^32.
const CounterValues kMemory = {
    {"parameters", 123}, {"gradients", 3'000'000'000}, {"optimizer_state", 5'000'000'000'000}, {"activations", 0}};

// What a reader gives back for `written`: its args in key order, as every
// event's args come back (a JSON object's keys are a map's).
Event as_read(Event written) {
  std::stable_sort(written.args.begin(), written.args.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return written;
}

void expect_same(const Event& a, const Event& b, const std::string& where) {
  EXPECT_EQ(a.rank, b.rank) << where;
  EXPECT_EQ(a.lane, b.lane) << where;
  EXPECT_EQ(a.name, b.name) << where;
  EXPECT_EQ(a.category, b.category) << where;
  EXPECT_EQ(a.begin_us, b.begin_us) << where;
  EXPECT_EQ(a.end_us, b.end_us) << where;
  EXPECT_EQ(a.bytes, b.bytes) << where;
  EXPECT_EQ(a.peer, b.peer) << where;
  EXPECT_EQ(a.flow, b.flow) << where;
  EXPECT_EQ(a.args, b.args) << where;
}

// The file at `path` read by both readers, streamed from the file and from memory.
std::vector<std::pair<std::string, std::vector<Event>>> read_all_ways(const std::string& path) {
  const std::string text = read_text(path);
  return {{"streamed file", read_chrome_trace(path)},
          {"streamed text", parse_chrome_trace(text)},
          {"dom", parse_chrome_trace_dom(text)}};
}

TEST(Counter, RecorderRecordsOneSampleNowWithItsSeriesInOrder) {
  Recorder recorder;
  recorder.counter(0, "memory", kMemory);  // no sink yet: nothing
  auto memory = std::make_shared<MemorySink>();
  recorder.add_sink(memory);
  const int64_t before = now_us();
  recorder.counter(3, "memory", kMemory);
  const int64_t after = now_us();
  const auto events = memory->events();
  ASSERT_EQ(events.size(), 1u);
  const Event& e = events[0];
  EXPECT_TRUE(e.is_counter());
  EXPECT_EQ(e.category, kCounterCategory);
  EXPECT_EQ(e.lane, kLaneCounter);
  EXPECT_EQ(e.name, "memory");
  EXPECT_EQ(e.rank, 3);
  EXPECT_GE(e.begin_us, before);
  EXPECT_LE(e.begin_us, after);
  EXPECT_EQ(e.end_us, e.begin_us);
  EXPECT_EQ(e.duration_us(), 0);
  EXPECT_EQ(e.bytes, 0);
  EXPECT_EQ(e.peer, -1);
  EXPECT_EQ(e.flow, 0u);
  const std::vector<std::pair<std::string, std::string>> series = {
      {"parameters", "123"}, {"gradients", "3000000000"}, {"optimizer_state", "5000000000000"}, {"activations", "0"}};
  EXPECT_EQ(e.args, series);
  EXPECT_EQ(e.arg("gradients"), "3000000000");
}

TEST(Counter, IsAChromeCounterEventWithNumericArgs) {
  const std::string path = temp_path("json.json");
  {
    ChromeJsonSink sink(path);
    sink.write(counter_event(2, "memory", kMemory, 1000));
    sink.write(counter_event(2, "memory", {{"negative", -7}, {"largest", INT64_MAX}}, 2000));
  }
  const std::string text = read_text(path);
  EXPECT_NE(text.find(R"({"ph":"C","pid":2,"name":"memory","ts":1000,"args":{"parameters":123,"gradients":3000000000,)"
                      R"("optimizer_state":5000000000000,"activations":0}})"),
            std::string::npos)
      << text;
  const auto doc = nlohmann::json::parse(text);  // the whole file is strict JSON
  int counters = 0;
  bool rank_named = false;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      EXPECT_NE(e.at("name"), "thread_name") << "a counter has no lane to name";
      rank_named |= e.at("name") == "process_name" && e.at("pid") == 2;
    }
    if (ph == "X") ADD_FAILURE() << "a counter was written as a box: " << e.dump();
    if (ph != "C") continue;
    ++counters;
    EXPECT_EQ(e.at("pid"), 2);
    EXPECT_EQ(e.at("name"), "memory");
    EXPECT_FALSE(e.contains("tid"));
    EXPECT_FALSE(e.contains("dur"));
    for (const auto& [key, value] : e.at("args").items()) EXPECT_TRUE(value.is_number_integer()) << key;
  }
  EXPECT_EQ(counters, 2);
  EXPECT_TRUE(rank_named);
  EXPECT_EQ(doc.at("traceEvents").back().at("args").at("largest").get<int64_t>(), INT64_MAX);
  EXPECT_EQ(doc.at("traceEvents").back().at("args").at("negative").get<int64_t>(), -7);
  // The live stream's line is the same object.
  EXPECT_EQ(event_to_json(counter_event(2, "memory", kMemory, 1000), 5).rfind(R"({"ph":"C","pid":2,)", 0), 0u);
  std::remove(path.c_str());
}

TEST(Counter, RoundTripsThroughBothReaders) {
  const std::string path = temp_path("roundtrip.json");
  const std::vector<Event> written = {counter_event(0, "memory", kMemory, 100),
                                      counter_event(1, "memory", {{"parameters", 4'294'967'296}}, 150),
                                      counter_event(0, "caf\xc3\xa9 \"q\"", {{"x y", -1}, {"b", 9'007'199'254'740'993}}, 200),
                                      counter_event(1, "empty", {}, 250)};
  {
    ChromeJsonSink sink(path);
    for (const Event& e : written) sink.write(e);
  }
  for (const auto& [how, back] : read_all_ways(path)) {
    ASSERT_EQ(back.size(), written.size()) << how;
    for (size_t i = 0; i < written.size(); ++i) expect_same(back[i], as_read(written[i]), how + " event " + std::to_string(i));
  }
  // And again: what was read writes the same file.
  const std::string again = temp_path("again.json");
  {
    ChromeJsonSink sink(again);
    for (const Event& e : read_chrome_trace(path)) sink.write(e);
  }
  EXPECT_EQ(read_text(again), [&] {
    // The first write in key order is what the second write is.
    const std::string sorted = temp_path("sorted.json");
    {
      ChromeJsonSink sink(sorted);
      for (const Event& e : written) sink.write(as_read(e));
    }
    std::string text = read_text(sorted);
    std::remove(sorted.c_str());
    return text;
  }());
  // One line of the live stream reads back the same.
  expect_same(parse_event_line(event_to_json(written[0], 0)), as_read(written[0]), "live line");
  for (const auto& p : {path, again}) std::remove(p.c_str());
}

TEST(Counter, ATraceOfBoxesAndCountersReadsBackBothKindsInOrder) {
  const std::string path = temp_path("mixed.json");
  const std::vector<Event> written = {
      Event{0, kLaneCompute, "fwd mb 0", "fwd", 0, 90, 0, -1, 0, {{"microbatch", "0"}}},
      counter_event(0, "memory", kMemory, 90),
      Event{0, kLaneComm, "send", "send", 100, 150, 4096, 1, flow_id(0, 1, 7, 0), {{"tag", "7"}}},
      Event{1, kLaneComm, "recv", "recv", 110, 160, 4096, 0, flow_id(0, 1, 7, 0), {{"tag", "7"}}},
      counter_event(1, "memory", kMemory, 160),
      // The same instant as a box's end: a zero-length sample beside it.
      counter_event(1, "memory", {{"gradients", 0}}, 160),
  };
  {
    ChromeJsonSink sink(path);
    for (const Event& e : written) sink.write(e);
  }
  for (const auto& [how, back] : read_all_ways(path)) {
    ASSERT_EQ(back.size(), written.size()) << how;
    for (size_t i = 0; i < written.size(); ++i) expect_same(back[i], as_read(written[i]), how + " event " + std::to_string(i));
  }
  TraceInfo info;
  read_chrome_trace(path, ReadLimits{}, &info);
  EXPECT_EQ(info.events, static_cast<int64_t>(written.size()));
  // The event limit counts counters too.
  ReadLimits five;
  five.max_events = 5;
  EXPECT_THROW(read_chrome_trace(path, five), TraceFormatError);
  EXPECT_THROW(parse_chrome_trace_dom(read_text(path), five), TraceFormatError);

  // Merging per-rank files keeps the counters, in time order, still "C".
  const std::string rank0 = temp_path("m.rank0.json"), rank1 = temp_path("m.rank1.json"), all = temp_path("m.json");
  {
    ChromeJsonSink a(rank0), b(rank1);
    b.write_clock_offset(1, ClockOffset{1000, 5});
    for (const Event& e : written) (e.rank == 0 ? a : b).write(e);
  }
  const MergeReport report = merge_trace_files({rank1, rank0}, all);
  EXPECT_EQ(report.events, written.size());
  EXPECT_EQ(report.flows, 1u);
  const auto merged = read_chrome_trace(all);
  ASSERT_EQ(merged.size(), written.size());
  int counters = 0;
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i > 0) EXPECT_LE(merged[i - 1].begin_us, merged[i].begin_us);
    if (!merged[i].is_counter()) continue;
    ++counters;
    EXPECT_EQ(merged[i].begin_us, merged[i].end_us);
    if (merged[i].rank == 1) EXPECT_EQ(merged[i].begin_us, 1160);  // rank 1's clock offset applied
  }
  EXPECT_EQ(counters, 3);
  for (const auto& p : {path, rank0, rank1, all}) std::remove(p.c_str());
}

TEST(Counter, ForeignCounterEventsReadAsTheDomReaderReadsThem) {
  // Other tools' counters: float and string values, a cat, an id, a dur and
  // a tid (all but the values ignored), repeated keys, args that are not an
  // object.
  const std::string text = R"({"traceEvents":[
    {"ph":"C","pid":4,"tid":"x","name":"cpu","cat":"sys","id":7,"dur":"?","ts":12.5,
     "args":{"user":1.5,"sys":"2","user":3,"nested":{"b":1,"a":[true,null]},"big":18446744073709551615}},
    {"ph":"C","name":"no pid","args":[1,2]},
    {"ph":"C"}
  ]})";
  const auto streamed = parse_chrome_trace(text);
  const auto dom = parse_chrome_trace_dom(text);
  ASSERT_EQ(streamed.size(), 3u);
  ASSERT_EQ(dom.size(), 3u);
  for (size_t i = 0; i < dom.size(); ++i) expect_same(streamed[i], dom[i], "event " + std::to_string(i));
  const Event& cpu = streamed[0];
  EXPECT_TRUE(cpu.is_counter());
  EXPECT_EQ(cpu.rank, 4);
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_EQ(cpu.lane, kLaneCounter);
  EXPECT_EQ(cpu.begin_us, 12);
  EXPECT_EQ(cpu.end_us, 12);
  const std::vector<std::pair<std::string, std::string>> series = {
      {"big", "18446744073709551615"}, {"nested", R"({"a":[true,null],"b":1})"}, {"sys", "2"}, {"user", "3"}};
  EXPECT_EQ(cpu.args, series);
  EXPECT_TRUE(streamed[1].args.empty());
  EXPECT_EQ(streamed[2].name, "");
  // Its time and rank are checked as an "X" event's are.
  for (const char* bad : {R"([{"ph":"C","ts":"soon"}])", R"([{"ph":"C","pid":true}])", R"([{"ph":"C","ts":4e54}])"}) {
    EXPECT_THROW(parse_chrome_trace(bad), TraceFormatError) << bad;
    EXPECT_THROW(parse_chrome_trace_dom(bad), TraceFormatError) << bad;
  }
  // A value that is no integer is written back as a string, still valid JSON.
  Event odd = streamed[0];
  odd.args = {{"float", "1.5"}, {"padded", "007"}, {"text", "a\"b"}};
  const std::string line = event_to_json(odd, 0);
  const auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed.at("args").at("padded"), "007");
  expect_same(parse_event_line(line), odd, "odd values");
}

TEST(Counter, DamagedTracesWithCountersAreReadOrRefusedAsTheDomReaderDoes) {
  // Cuts, flipped bytes and inserted tokens in a file of boxes and counters:
  // the two readers give the same events, or both refuse.
  const std::string path = temp_path("damaged.json");
  {
    ChromeJsonSink sink(path);
    for (int i = 0; i < 4; ++i) {
      sink.write(Event{i % 2, kLaneCompute, "fwd", "fwd", 10 * i, 10 * i + 5, 0, -1, 0, {{"step", "1"}}});
      sink.write(counter_event(i % 2, "memory", kMemory, 10 * i + 5));
    }
  }
  const std::string base = read_text(path);
  std::remove(path.c_str());
  const char* tokens[] = {"{", "}", ",", "\"", "0", "-", "1.5", "null", "\"ph\":\"C\"", "\"ts\":", "\"args\":{",
                          "9999999999999999999999"};
  std::mt19937 rng(7);
  int accepted = 0;
  const int kVariants = 1000;
  for (int i = 0; i < kVariants && !HasFailure(); ++i) {
    std::string text = base;
    const size_t at = rng() % (text.size() + 1);
    switch (rng() % 3) {
      case 0: text.resize(at); break;
      case 1:
        if (at < text.size()) text[at] = static_cast<char>(rng());
        break;
      case 2: text.insert(at, tokens[rng() % (sizeof tokens / sizeof *tokens)]); break;
    }
    std::vector<Event> streamed, dom;
    bool stream_ok = true, dom_ok = true;
    try {
      streamed = parse_chrome_trace(text);
    } catch (const TraceFormatError&) {
      stream_ok = false;
    }
    try {
      dom = parse_chrome_trace_dom(text);
    } catch (const TraceFormatError&) {
      dom_ok = false;
    }
    ASSERT_EQ(stream_ok, dom_ok) << "variant " << i << ": " << text;
    if (!stream_ok) continue;
    ++accepted;
    ASSERT_EQ(streamed.size(), dom.size()) << "variant " << i;
    for (size_t e = 0; e < dom.size(); ++e) expect_same(streamed[e], dom[e], "variant " + std::to_string(i));
  }
  EXPECT_GT(accepted, kVariants / 20);
  EXPECT_LT(accepted, kVariants * 19 / 20);
}

TEST(Counter, TheLiveStreamCarriesCounters) {
  LiveReceiver receiver;  // loopback, a free port
  {
    LiveSink sink("127.0.0.1:" + std::to_string(receiver.port()));
    sink.write_clock_offset(1, ClockOffset{1000, 5});
    sink.write(Event{1, kLaneCompute, "fwd", "fwd", 0, 40, 0, -1, 0, {}});
    sink.write(counter_event(1, "memory", kMemory, 40));
    sink.flush();
    EXPECT_EQ(sink.dropped(), 0u);
  }
  ASSERT_EQ(receiver.wait_for(2, 10000), 2u);
  const auto events = receiver.drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[0].is_counter());
  Event expected = as_read(counter_event(1, "memory", kMemory, 1040));  // in rank 0's clock
  expect_same(events[1], expected, "live counter");
  EXPECT_TRUE(receiver.errors().empty());
}

}  // namespace
}  // namespace distlab::trace
