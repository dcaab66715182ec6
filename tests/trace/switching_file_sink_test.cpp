// trace::SwitchingFileSink: each labelled part of a run in a file of its
// own, checked against the events split by hand, and the file names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "trace/reader.hpp"
#include "trace/switching_file_sink.hpp"

namespace distlab::trace {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "distlab_switching_" + std::to_string(getpid()) + "_" + name;
}

Event event(int rank, const std::string& name, int64_t begin_us) {
  return Event{rank, kLaneCompute, name, "fwd", begin_us, begin_us + 10, 0, -1, 0, {{"i", name}}};
}

void expect_same(const std::vector<Event>& got, const std::vector<Event>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].rank, want[i].rank);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].begin_us, want[i].begin_us);
    EXPECT_EQ(got[i].end_us, want[i].end_us);
    EXPECT_EQ(got[i].args, want[i].args);
  }
}

TEST(WithLabel, InsertsBeforeTheExtensionOfTheFileOnly) {
  EXPECT_EQ(with_label("pp.json", "gpipe"), "pp.gpipe.json");
  EXPECT_EQ(with_label("/tmp/a.b/pp.json", "1f1b"), "/tmp/a.b/pp.1f1b.json");
  EXPECT_EQ(with_label("pp", "gpipe"), "pp.gpipe");
  EXPECT_EQ(with_label("runs.v2/pp", "zb_h1"), "runs.v2/pp.zb_h1");
  EXPECT_EQ(with_label("t_{rank}.json", "gpipe"), "t_{rank}.gpipe.json");
}

// Events go to the file opened last; none before the first open() or after
// close(). The reference: the same events, split by hand.
TEST(SwitchingFileSink, EachPartInItsOwnFile) {
  const std::string base = temp_path("pp.json");
  SwitchingFileSink sink(base);
  const std::vector<Event> before = {event(0, "lost", 1)};
  const std::vector<Event> a = {event(0, "a0", 100), event(1, "a1", 110), event(0, "a2", 120)};
  const std::vector<Event> b = {event(1, "b0", 200)};
  const std::vector<Event> after = {event(0, "also lost", 300)};
  for (const auto& e : before) sink.write(e);
  EXPECT_EQ(sink.open("gpipe", 0, false), temp_path("pp.gpipe.json"));
  for (const auto& e : a) sink.write(e);
  EXPECT_EQ(sink.open("1f1b", 0, false), temp_path("pp.1f1b.json"));
  for (const auto& e : b) sink.write(e);
  sink.flush();
  sink.close();
  for (const auto& e : after) sink.write(e);

  expect_same(read_chrome_trace(temp_path("pp.gpipe.json")), a);
  expect_same(read_chrome_trace(temp_path("pp.1f1b.json")), b);
  EXPECT_FALSE(std::filesystem::exists(base));
  std::remove(temp_path("pp.gpipe.json").c_str());
  std::remove(temp_path("pp.1f1b.json").c_str());
}

// A process of a multi-process job writes its own file per part.
TEST(SwitchingFileSink, OneFilePerProcessOfAJob) {
  SwitchingFileSink sink(temp_path("job.json"));
  EXPECT_EQ(sink.open("gpipe", 3, /*several_processes=*/true), temp_path("job.gpipe.rank3.json"));
  sink.write(event(3, "x", 5));
  sink.close();
  expect_same(read_chrome_trace(temp_path("job.gpipe.rank3.json")), {event(3, "x", 5)});
  std::remove(temp_path("job.gpipe.rank3.json").c_str());
}

// Ranks of the threads backend write while one of them switches files: every
// event lands whole in one of the two files, none is lost or torn.
TEST(SwitchingFileSink, WritersAndASwitchAtOnce) {
  SwitchingFileSink sink(temp_path("busy.json"));
  sink.open("first", 0, false);
  std::vector<std::thread> writers;
  for (int rank = 0; rank < 3; ++rank)
    writers.emplace_back([&sink, rank] {
      for (int i = 0; i < 500; ++i) sink.write(event(rank, "e", i));
    });
  sink.open("second", 0, false);
  for (auto& w : writers) w.join();
  sink.close();
  const auto first = read_chrome_trace(temp_path("busy.first.json"));
  const auto second = read_chrome_trace(temp_path("busy.second.json"));
  EXPECT_EQ(first.size() + second.size(), 1500u);
  std::remove(temp_path("busy.first.json").c_str());
  std::remove(temp_path("busy.second.json").c_str());
}

}  // namespace
}  // namespace distlab::trace
