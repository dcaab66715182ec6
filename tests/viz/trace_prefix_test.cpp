// --trace X.json where a job of several processes wrote X.rank0.json,
// X.rank1.json, ...: the name the program was given opens every rank's file.
#include <gtest/gtest.h>

#include <cstdio>

#include "trace_loader.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

trace::Event span_of_rank(int rank) {
  trace::Event e;
  e.rank = rank;
  e.lane = "compute";
  e.name = "forward";
  e.category = "fwd";
  e.begin_us = 10;
  e.end_us = 20;
  return e;
}

TEST(TracePrefix, AMissingFileOpensTheFilesItsRanksWrote) {
  const std::string prefix = temp_path("prefix.json");
  std::vector<std::string> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.push_back(temp_path("prefix.rank" + std::to_string(rank) + ".json"));
    write_with_library(ranks.back(), {span_of_rank(rank)});
  }
  EXPECT_EQ(rank_files_of(prefix), ranks);

  std::vector<std::string> paths = {prefix};
  const std::vector<std::string> lines = open_rank_files_instead(paths);
  EXPECT_EQ(paths, ranks);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(prefix + "' does not exist"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(ranks.front() + " .. " + ranks.back()), std::string::npos) << lines[0];

  // The program: one line, then the Memory panel's usual run on 3 ranks' files.
  std::string out;
  const std::string png = temp_path("prefix.png");
  ASSERT_EQ(run({VIZ_BINARY, "--panel", "memory", "--trace", prefix, "--screenshot", png}, {"DISPLAY="}, &out), 0)
      << out;
  EXPECT_NE(out.find("opened the 3 file(s) its ranks wrote"), std::string::npos) << out;
  EXPECT_EQ(out.find("cannot open"), std::string::npos) << out;
  for (const std::string& path : ranks) std::remove(path.c_str());
}

TEST(TracePrefix, AFileThatExistsOrHasNoRankFilesIsLeftAsGiven) {
  const std::string whole = temp_path("whole_prefix.json");
  write_with_library(whole, {span_of_rank(0)});
  write_with_library(temp_path("whole_prefix.rank0.json"), {span_of_rank(0)});
  EXPECT_TRUE(rank_files_of(whole).empty());
  std::vector<std::string> paths = {whole, temp_path("nothing_at_all.json")};
  const std::vector<std::string> given = paths;
  EXPECT_TRUE(open_rank_files_instead(paths).empty());
  EXPECT_EQ(paths, given);

  // A missing file with no rank files still ends with the loader's message.
  std::string out;
  EXPECT_EQ(run({VIZ_BINARY, "--trace", temp_path("nothing_at_all.json"), "--screenshot", temp_path("none.png")},
                {"DISPLAY="}, &out),
            1);
  EXPECT_NE(out.find("cannot open trace file"), std::string::npos) << out;
}

}  // namespace
}  // namespace distlab::viz
