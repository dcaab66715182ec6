// The flight recorder across gloo processes started by distlab-run: a rank
// that skips a collective, and a rank SIGKILLed in the middle of the job,
// whose peers' files still tell what happened.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "flight/why.hpp"
#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;
using distlab::launcher::testing::Finished;
namespace flight = distlab::flight;

// Three ranks, a 2 s timeout, the flight files into `dir`.
Finished run_fault(const std::string& fault, int culprit, const std::string& dir) {
  setenv("DISTLAB_FLIGHT_DIR", dir.c_str(), 1);
  Finished f = distlab::launcher::testing::run_launcher(
      {"--nproc-per-node", "3", "--master-port", "0", "--timeout-ms", "2000", "--grace-ms", "5000",
       FLIGHT_WORKER_PATH, "--fault", fault, "--culprit", std::to_string(culprit)},
      90s);
  unsetenv("DISTLAB_FLIGHT_DIR");
  return f;
}

TEST(FlightGloo, SkippedCollectiveIsFoundAcrossProcesses) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_skip");
  const Finished f = run_fault("skip", 1, dir);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0);
  EXPECT_LT(f.seconds, 30);
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  ASSERT_FALSE(d.findings.empty());
  const auto& first = d.findings.front();
  EXPECT_EQ(first.cause, "skip") << text << f.out << f.err;
  EXPECT_EQ(first.culprits, std::vector<int>{1}) << text;
  EXPECT_EQ(first.seq, 4u) << text;
  EXPECT_EQ(first.op, "all_reduce") << text;
  EXPECT_NE(text.find("read 3 flight file(s): ranks 0-2 of 3"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 never entered it: its last operation in world was all_reduce #3"), std::string::npos)
      << text;
  std::printf("%s", text.c_str());
}

TEST(FlightGloo, SigkilledRankIsNamedFromItsPeersFiles) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_dead");
  const Finished f = run_fault("dead", 2, dir);
  ASSERT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0);
  EXPECT_NE((f.out + f.err).find("was killed by SIGKILL"), std::string::npos) << f.out << f.err;
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  ASSERT_FALSE(d.findings.empty());
  const auto& first = d.findings.front();
  EXPECT_EQ(first.cause, "dead") << text << f.out << f.err;
  EXPECT_EQ(first.culprits, std::vector<int>{2}) << text;
  EXPECT_EQ(first.waiting, (std::vector<int>{0, 1})) << text;
  EXPECT_EQ(first.seq, 4u) << text;
  EXPECT_EQ(first.op, "all_reduce") << text;
  EXPECT_NE(text.find("read 2 flight file(s): ranks 0, 1 of 3; none from rank 2"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 left the job without a flight file"), std::string::npos) << text;
  std::printf("%s", text.c_str());
}

}  // namespace
