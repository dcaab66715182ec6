// viz/README's flight example starts from nothing: viz_flight_fault_emitter
// makes its --dir, and one it cannot make ends with one line naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

TEST(FlightEmitterDir, ANewFolderIsMadeForTheTraceAndTheFlightFiles) {
  const std::string dir = temp_path("emitter_new_dir") + "/hang";
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  std::string out;
  ASSERT_EQ(run({VIZ_FLIGHT_EMITTER, "--dir", dir, "--fault", "skip", "--culprit", "1", "--ranks", "2", "--timeout-ms",
                 "300"},
                {}, &out),
            0)
      << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/trace.json")) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/flight.rank0.json")) << out;
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST(FlightEmitterDir, AFolderThatCannotBeMadeIsNamedInOneLine) {
  const std::string file = temp_path("emitter_plain_file");
  write_text(file, "not a folder");
  std::string out;
  EXPECT_EQ(run({VIZ_FLIGHT_EMITTER, "--dir", file + "/hang", "--culprit", "1", "--ranks", "2"}, {}, &out), 2) << out;
  EXPECT_NE(out.find("--dir " + file + "/hang: cannot create the folder"), std::string::npos) << out;
  EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
}

}  // namespace
}  // namespace distlab::viz
