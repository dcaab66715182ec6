// The streaming reader against the reference it replaced (the nlohmann DOM
// reader, dom_reader.hpp): on files the library writes, on foreign and odd
// JSON, on every chunk size, and on thousands of damaged variants, the two
// give the same events or both refuse with a TraceFormatError.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <random>

#include "trace/chrome_json.hpp"
#include "trace/dom_reader.hpp"
#include "trace/json_pull.hpp"
#include "trace/push_reader.hpp"
#include "trace/reader.hpp"

namespace distlab::trace {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "distlab_stream_" + std::to_string(getpid()) + "_" + name;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Varied events: unicode and escapes in names, nesting, several ranks and
// lanes, flows, args in any order.
std::vector<Event> varied_events(int count, unsigned seed) {
  std::mt19937 rng(seed);
  const char* names[] = {"send", "recv", "fwd mb 3", "caf\xc3\xa9 \xe2\x82\xac", "tab\there", "quote \"q\"", "back\\slash",
                         "nl\nx", "\x01 ctl", "\xf0\x9f\x98\x80"};
  const char* lanes[] = {kLaneCompute, kLaneComm, "stage 1", "\xce\xbb lane"};
  std::vector<Event> events;
  for (int i = 0; i < count; ++i) {
    Event e;
    e.rank = static_cast<int>(rng() % 5);
    e.lane = lanes[rng() % 4];
    e.name = names[rng() % 10];
    e.category = i % 3 == 0 ? "send" : (i % 3 == 1 ? "recv" : "fwd");
    e.begin_us = static_cast<int64_t>(rng() % 1000000) - 1000;
    e.end_us = e.begin_us + static_cast<int64_t>(rng() % 500);
    e.bytes = rng() % 2 ? static_cast<int64_t>(rng()) : 0;
    e.peer = rng() % 2 ? static_cast<int>(rng() % 5) : -1;
    e.flow = rng() % 2 ? (static_cast<uint64_t>(rng()) << 32 | rng()) : 0;
    for (unsigned a = 0; a < rng() % 4; ++a) e.args.emplace_back(names[rng() % 10], std::to_string(rng()));
    events.push_back(e);
  }
  return events;
}

std::string write_file(const std::string& name, const std::vector<Event>& events) {
  const std::string path = temp_path(name);
  ChromeJsonSink sink(path);
  for (const Event& e : events) sink.write(e);
  sink.close();
  return path;
}

void expect_same(const std::vector<Event>& a, const std::vector<Event>& b, const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].rank, b[i].rank) << where << " event " << i;
    EXPECT_EQ(a[i].lane, b[i].lane) << where << " event " << i;
    EXPECT_EQ(a[i].name, b[i].name) << where << " event " << i;
    EXPECT_EQ(a[i].category, b[i].category) << where << " event " << i;
    EXPECT_EQ(a[i].begin_us, b[i].begin_us) << where << " event " << i;
    EXPECT_EQ(a[i].end_us, b[i].end_us) << where << " event " << i;
    EXPECT_EQ(a[i].bytes, b[i].bytes) << where << " event " << i;
    EXPECT_EQ(a[i].peer, b[i].peer) << where << " event " << i;
    EXPECT_EQ(a[i].flow, b[i].flow) << where << " event " << i;
    EXPECT_EQ(a[i].args, b[i].args) << where << " event " << i;
  }
}

// Both readers on `text`: the same events, or both a TraceFormatError.
// Returns whether they accepted it.
bool agree(const std::string& text, const std::string& where, const ReadLimits& limits = {}) {
  std::vector<Event> dom, streamed;
  bool dom_ok = true, stream_ok = true;
  std::string dom_error, stream_error;
  try {
    dom = parse_chrome_trace_dom(text, limits);
  } catch (const TraceFormatError& e) {
    dom_ok = false;
    dom_error = e.what();
  }
  try {
    streamed = parse_chrome_trace(text, limits);
  } catch (const TraceFormatError& e) {
    stream_ok = false;
    stream_error = e.what();
  }
  EXPECT_EQ(dom_ok, stream_ok) << where << "\ninput: " << text.substr(0, 300) << "\ndom: " << dom_error
                               << "\nstream: " << stream_error;
  if (dom_ok && stream_ok) expect_same(dom, streamed, where);
  return dom_ok && stream_ok;
}

// Foreign and odd JSON that both readers take.
std::vector<std::string> odd_accepted() {
  return {
      R"([])",
      R"({})",
      "\xEF\xBB\xBF[]",
      R"({"traceEvents":[],"displayTimeUnit":"ms","otherData":{"x":[1,{"ph":"X"}]}})",
      // Events in any array at the top level, as the DOM reader takes them.
      R"({"a":[{"ph":"X","ts":1,"dur":2}],"traceEvents":[{"ph":"X","ts":5}]})",
      R"([{"ph":"X","ts":1.9,"dur":2e2,"pid":"0x10","tid":-3,"name":7,"cat":null}])",
      R"([{"ph":"X","pid":1,"pid":2,"ts":1,"ts":4,"args":{"b":1,"a":{"z":[1,2.5,"\u00e9"],"y":true},"b":"last"}}])",
      R"([{"ph":"X","args":{"lane":3,"peer":"2","bytes":1.5,"flow":12,"x":-0.0,"y":1e300,"z":123456789012345678901}}])",
      R"([{"ph":"X","args":"not an object"},{"ph":"X","args":[1]},{"ph":"B"},{"ph":5},1,"s",[{"ph":"X"}],null])",
      R"([{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"stage\n0"}},{"ph":"X","pid":1,"tid":2}])",
      R"([{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":{"k":1}}},{"ph":"X","pid":1,"tid":2}])",
      "  [ {\"ph\" : \"X\" , \"name\" : \"\\ud83d\\ude00 \\/ \\b\\f\\r\\t\" } ]  \n",
      R"([{"ph":"X","ts":-4611686018427387903,"dur":0,"args":{"flow":"-1"}}])",
      // A NUL byte ends the input (found by the fuzzer: the DOM reader stops there).
      std::string("[{\"ph\":\"X\"}] \0 garbage", 22),
  };
}

// What both readers refuse.
std::vector<std::string> odd_refused() {
  return {
      "", "42", "\"x\"", "[", "[{]", "[1,]", "{\"a\":1,}", "[01]", "[1.]", "[.5]", "[-]", "[+1]", "[1e]", "[tru]",
      "[nul]", "[] []", "[\"\\ud800\"]", "[\"\\udc00\"]", "[\"\\x\"]", "[\"a\x01\"]", "[\"\xc3\"]", "[\"\xc0\x80\"]",
      "[\"\xed\xa0\x80\"]", "[\"\xf4\x90\x80\x80\"]", "\xEF\xBB[]", "[1e400]", "{\"a\" 1}", "{1:2}", "[{\"ph\":\"X\"}",
      R"([{"ph":"X","ts":4e54}])", R"([{"ph":"X","pid":true}])", R"([{"ph":"X","args":{"flow":"x"}}])",
      R"([{"ph":"M","name":"thread_name","args":{"name":"a"},"pid":"zz"}])", "[/* comment */]", std::string("[\0]", 3), std::string("[\"a\0\"]", 6)};
}

TEST(StreamReader, WrittenFilesReadBackAsTheirEventsAndAsTheDomReaderReadsThem) {
  const auto events = varied_events(3000, 1);
  const std::string path = write_file("varied.json", events);
  const auto streamed = read_chrome_trace(path);
  // Against the writer's input: everything but the args' order (a JSON
  // object's keys come back sorted).
  ASSERT_EQ(streamed.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    auto args = events[i].args;
    std::stable_sort(args.begin(), args.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    // A repeated key keeps its last value.
    std::vector<std::pair<std::string, std::string>> unique;
    for (size_t a = 0; a < args.size(); ++a)
      if (a + 1 == args.size() || args[a + 1].first != args[a].first) unique.push_back(args[a]);
    EXPECT_EQ(streamed[i].name, events[i].name);
    EXPECT_EQ(streamed[i].lane, events[i].lane);
    EXPECT_EQ(streamed[i].begin_us, events[i].begin_us);
    EXPECT_EQ(streamed[i].end_us, events[i].end_us);
    EXPECT_EQ(streamed[i].flow, events[i].flow);
    EXPECT_EQ(streamed[i].args, unique) << i;
  }
  EXPECT_TRUE(agree(read_text(path), "varied.json"));
  std::remove(path.c_str());
}

TEST(StreamReader, EveryChunkSizeGivesTheSameEvents) {
  const std::string path = write_file("chunks.json", varied_events(200, 2));
  const auto reference = parse_chrome_trace_dom(read_text(path));
  for (size_t chunk : {1, 2, 3, 7, 64, 4093}) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
    ByteSource source(file.get(), chunk);
    std::vector<Event> got;
    stream_chrome(source, ReadLimits{}, [&](Event& e) { got.push_back(e); });
    expect_same(reference, got, "chunk " + std::to_string(chunk));
  }
  std::remove(path.c_str());
}

TEST(StreamReader, ForeignAndOddJsonReadsAsTheDomReaderReadsIt) {
  const std::vector<std::string> accepted = odd_accepted();
  for (const std::string& text : accepted) EXPECT_TRUE(agree(text, "accepted")) << text;
  const std::vector<std::string> refused = odd_refused();
  for (const std::string& text : refused) EXPECT_FALSE(agree(text, "refused")) << text;
}

// `base` with one to three edits: cut, a flipped byte, a token inserted,
// bytes erased. A small differential fuzzer's mutations.
std::string damaged(const std::string& base, std::mt19937& rng) {
  const char* tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "0", "-", "1e9", "null", "\"ph\":\"X\"",
                          "\"args\":{", "\xc3", "\xff", " ", "\n", "\"lane\":", "\"ts\":", "9999999999999999999999"};
  std::string text = base;
  for (int m = 0, edits = 1 + static_cast<int>(rng() % 3); m < edits; ++m) {
    const size_t at = rng() % (text.size() + 1);
    switch (rng() % 4) {
      case 0: text.resize(at); break;
      case 1:
        if (at < text.size()) text[at] = static_cast<char>(rng());
        break;
      case 2: text.insert(at, tokens[rng() % (sizeof tokens / sizeof *tokens)]); break;
      case 3: text.erase(at, rng() % 8); break;
    }
  }
  return text;
}

TEST(StreamReader, DamagedVariantsOfAFileAreReadOrRefusedAsTheDomReaderDoes) {
  const std::string base = read_text(write_file("base.json", varied_events(12, 3)));
  std::mt19937 rng(4);
  int accepted = 0;
  const int kVariants = 3000;
  for (int i = 0; i < kVariants; ++i) {
    const std::string text = damaged(base, rng);
    accepted += agree(text, "variant " + std::to_string(i)) ? 1 : 0;
    if (HasFailure()) break;
  }
  // Both outcomes were exercised.
  EXPECT_GT(accepted, kVariants / 20);
  EXPECT_LT(accepted, kVariants * 19 / 20);
}

TEST(StreamReader, HostileInputIsRefusedNotACrash) {
  // Nesting a million deep: no recursion, so no stack overflow; where the
  // value would be kept (an argument), a clear refusal.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_EQ(parse_chrome_trace("{\"otherData\":" + deep + ",\"traceEvents\":[{\"ph\":\"X\",\"id\":" + deep + "}]}").size(),
            1u);
  EXPECT_THROW(parse_chrome_trace("[{\"ph\":\"X\",\"args\":{\"x\":" + deep + "}}]"), TraceFormatError);
  EXPECT_THROW(parse_chrome_trace(std::string(1000000, '[')), TraceFormatError);
  EXPECT_THROW(parse_chrome_trace("[" + std::string(100000, '1') + "]"), TraceFormatError);  // a 100k-digit number
  // The event limit names itself.
  const std::string three = "[{\"ph\":\"X\"},{\"ph\":\"X\"},{\"ph\":\"X\"}]";
  try {
    parse_chrome_trace(three, ReadLimits{1 << 20, 2});
    ADD_FAILURE() << "a third event over the limit of 2 was read";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 2 events"), std::string::npos) << e.what();
  }
  // The file size limit, before reading anything.
  const std::string path = write_file("limit.json", varied_events(10, 5));
  try {
    read_chrome_trace(path, ReadLimits{100, 10});
    ADD_FAILURE() << "a file over 100 bytes was read";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the limit of 100"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(StreamReader, ClockOffsetMetadataIsReadAndCheckedButNotApplied) {
  const std::string path = temp_path("offset.json");
  {
    ChromeJsonSink sink(path);
    sink.write_clock_offset(1, ClockOffset{-5000123, 42});
    sink.write(Event{1, kLaneComm, "recv", "recv", 100, 150, 8, 0, 7, {}});
  }
  TraceInfo info;
  const auto events = read_chrome_trace(path, ReadLimits{}, &info);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].begin_us, 100);
  ASSERT_EQ(info.clock_offsets.count(1), 1u);
  EXPECT_EQ(info.clock_offsets[1].offset_us, -5000123);
  EXPECT_EQ(info.clock_offsets[1].uncertainty_us, 42);
  EXPECT_THROW(parse_chrome_trace(R"([{"ph":"M","name":"clock_offset","pid":1,"args":{"offset_us":"x","uncertainty_us":1}}])"),
               TraceFormatError);
  std::remove(path.c_str());
}

// The push reader (push_reader.hpp) on `text` given in pieces of `piece`
// bytes (the last ones shorter): its events, or nothing when it failed.
std::optional<std::vector<Event>> pushed(const std::string& text, size_t piece, const ReadLimits& limits = {},
                                         TraceInfo* info = nullptr) {
  std::vector<Event> got;
  ChromePushReader reader(limits, [&](Event& e) { got.push_back(e); });
  for (size_t at = 0; at < text.size(); at += piece) reader.push(text.data() + at, std::min(piece, text.size() - at));
  if (!reader.finish()) return std::nullopt;
  if (info != nullptr) *info = reader.info();
  EXPECT_EQ(reader.info().events, static_cast<int64_t>(got.size()));
  return got;
}

TEST(PushReader, AFileInPiecesOfAnySizeGivesTheDomReadersEvents) {
  const std::string path = write_file("push.json", varied_events(3000, 6));
  const std::string text = read_text(path);
  const auto reference = parse_chrome_trace_dom(text);
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{4093}, size_t{1} << 20, text.size()}) {
    const auto got = pushed(text, piece);
    ASSERT_TRUE(got.has_value()) << "pieces of " << piece;
    expect_same(reference, *got, "pieces of " + std::to_string(piece));
  }
  std::remove(path.c_str());
}

TEST(PushReader, OddJsonSplitAnywhereIsReadOrRefusedAsTheDomReaderDoes) {
  for (const std::string& text : odd_accepted()) {
    const auto reference = parse_chrome_trace_dom(text);
    for (size_t piece = 1; piece <= text.size(); ++piece) {
      const auto got = pushed(text, piece);
      ASSERT_TRUE(got.has_value()) << text << " in pieces of " << piece;
      expect_same(reference, *got, text + " in pieces of " + std::to_string(piece));
    }
  }
  for (const std::string& text : odd_refused()) {
    EXPECT_THROW(parse_chrome_trace_dom(text), TraceFormatError) << text;
    for (size_t piece : {size_t{1}, size_t{3}, text.size() + 1}) EXPECT_FALSE(pushed(text, piece).has_value()) << text;
  }
}

TEST(PushReader, DamagedVariantsAreReadOrRefusedAsTheDomReaderDoes) {
  const std::string base = read_text(write_file("push_base.json", varied_events(12, 7)));
  std::mt19937 rng(8);
  int accepted = 0;
  const int kVariants = 1000;
  for (int i = 0; i < kVariants; ++i) {
    const std::string text = damaged(base, rng);
    std::optional<std::vector<Event>> reference;
    try {
      reference = parse_chrome_trace_dom(text);
    } catch (const TraceFormatError&) {
    }
    const auto got = pushed(text, 1 + rng() % 97);
    ASSERT_EQ(reference.has_value(), got.has_value()) << "variant " << i << ": " << text;
    if (got) {
      expect_same(*reference, *got, "variant " + std::to_string(i));
      ++accepted;
    }
  }
  EXPECT_GT(accepted, kVariants / 20);
  EXPECT_LT(accepted, kVariants * 19 / 20);
}

TEST(PushReader, EventsComeAsTheirBytesArriveNotAtTheEnd) {
  const std::string text = read_text(write_file("push_half.json", varied_events(1000, 9)));
  int64_t seen = 0;
  ChromePushReader reader(ReadLimits{}, [&](Event&) { ++seen; });
  reader.push(text.data(), text.size() / 2);
  // About half the events are in the first half of the bytes.
  EXPECT_GT(seen, 400);
  EXPECT_LT(seen, 600);
  // The rest written into more room than it needs (as fread fills a
  // buffer): only the bytes committed count.
  const size_t rest = text.size() - text.size() / 2;
  std::copy(text.data() + text.size() / 2, text.data() + text.size(), reader.space(rest + 4096));
  reader.commit(rest);
  EXPECT_EQ(seen, 1000);
  EXPECT_TRUE(reader.finish()) << reader.failure();
}

TEST(PushReader, HugeValuesLimitsAndMetadataAsTheStreamingReader) {
  // An 8 MB value before the events, in 1 KB pieces: read (retried only when
  // its bytes have doubled, so this takes milliseconds, not minutes).
  const std::string big = "{\"otherData\":\"" + std::string(8 << 20, 'x') + "\",\"traceEvents\":[{\"ph\":\"X\"}]}";
  const auto got = pushed(big, 1024);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), 1u);
  const std::string three = "[{\"ph\":\"X\"},{\"ph\":\"X\"},{\"ph\":\"X\"}]";
  EXPECT_FALSE(pushed(three, 5, ReadLimits{1 << 20, 2}).has_value());
  EXPECT_FALSE(pushed(three, 5, ReadLimits{20, 10}).has_value());
  EXPECT_TRUE(pushed(three, 5, ReadLimits{static_cast<int64_t>(three.size()), 3}).has_value());
  // Clock offsets, as the streaming reader reports them.
  const std::string path = temp_path("push_offset.json");
  {
    ChromeJsonSink sink(path);
    sink.write_clock_offset(1, ClockOffset{-5000123, 42});
    sink.write(Event{1, kLaneComm, "recv", "recv", 100, 150, 8, 0, 7, {}});
  }
  TraceInfo info;
  ASSERT_TRUE(pushed(read_text(path), 10, ReadLimits{}, &info).has_value());
  ASSERT_EQ(info.clock_offsets.count(1), 1u);
  EXPECT_EQ(info.clock_offsets[1].offset_us, -5000123);
  EXPECT_EQ(info.clock_offsets[1].uncertainty_us, 42);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace distlab::trace
