// The trace files a lesson run leaves in a folder of its own, checked as
// Perfetto needs them (tests/support/perfetto_tracks.hpp): the --step runs
// of step_test.cpp and the runs of perfetto_test.cpp.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/perfetto_tracks.hpp"

namespace distlab::lessons::testing {

// An empty folder of this test process's own for `name`'s files.
inline std::string fresh_trace_folder(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "traces_" + std::to_string(getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Every trace file a run left in `dir` (lesson 10 writes one per schedule,
// processes one per rank), in name order.
inline std::vector<std::string> traces_in(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Checks one file: every thread track's complete events nest or stay apart,
// every send->recv arrow lands on its slice. Returns its complete events.
inline size_t expect_nested(const std::string& path) {
  const distlab::test_support::TrackReport report = distlab::test_support::check_tracks(path);
  EXPECT_EQ(report.partial_overlaps, 0u) << path << ": " << report.first_problem;
  EXPECT_EQ(report.misplaced_flows, 0u) << path << ": " << report.first_problem;
  return report.complete;
}

}  // namespace distlab::lessons::testing
