// distlab-trace why on a folder with no flight file: no diagnosis of a
// healthy job, but where it looked, how files get there, and exit 1.
#include <gtest/gtest.h>

#include "flight/why.hpp"
#include "launcher_process.hpp"
#include "run_why.hpp"

namespace {

using distlab::launcher::testing::fresh_dir;
using distlab::flight_test::run_why;
namespace flight = distlab::flight;

TEST(WhyEmpty, AnEmptyFolderSaysNoFlightFileWasFoundAndWhereTheyGo) {
  const std::string dir = fresh_dir("why_empty");
  const flight::Diagnosis d = flight::diagnose_files({dir});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].cause, "no files");
  EXPECT_EQ(d.findings[0].text.rfind("no flight file found in " + dir + ":", 0), 0u) << d.findings[0].text;
  EXPECT_NE(d.findings[0].text.find("DISTLAB_FLIGHT_DIR"), std::string::npos) << d.findings[0].text;

  const auto run = run_why(dir);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("no flight file found in " + dir), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("every recorded operation completed"), std::string::npos) << run.out;
}

TEST(WhyEmpty, AMissingFolderSaysTheSame) {
  const std::string dir = fresh_dir("why_missing") + "/not_there";
  const auto run = run_why(dir);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("no flight file found in " + dir), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("no rank is waiting"), std::string::npos) << run.out;
}

TEST(WhyEmpty, DumpsThatAllCompletedStillSayNoRankIsWaiting) {
  flight::Dump dump;
  dump.rank = 0;
  dump.world_size = 1;
  const flight::Diagnosis d = flight::diagnose({dump});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].cause, "none");
  EXPECT_EQ(d.findings[0].text, "no rank is waiting: every recorded operation completed");
}

}  // namespace
