// The flight recorder across gloo processes started by distlab-run: a rank
// that skips a collective, and a rank SIGKILLed in the middle of the job,
// whose peers' files still tell what happened.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

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

// A job that hangs (a rank skipped a collective; a 60 s timeout: nothing
// has failed yet): SIGUSR1 to distlab-run makes every worker write its
// flight file and go on, and the files already tell why it is stuck.
TEST(FlightGloo, SigusrToTheLauncherAsksEveryRankWhileTheJobHangs) {
  namespace t = distlab::launcher::testing;
  const std::string dir = t::fresh_dir("flight_gloo_usr1");
  setenv("DISTLAB_FLIGHT_DIR", dir.c_str(), 1);
  t::LauncherProcess job({"--nproc-per-node", "3", "--master-port", "0", "--timeout-ms", "60000", "--grace-ms", "2000",
                          FLIGHT_WORKER_PATH, "--fault", "skip", "--culprit", "1"},
                         dir);
  unsetenv("DISTLAB_FLIGHT_DIR");
  std::this_thread::sleep_for(3s);  // the ranks are in #4 by now (they reach it in well under a second)
  kill(job.pid(), SIGUSR1);
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(t::wait_for_file(dir + "/flight.rank" + std::to_string(r) + ".json", 20s)) << "rank " << r;
  std::this_thread::sleep_for(500ms);  // renamed into place whole; let the last one land
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  kill(job.pid(), SIGTERM);
  const Finished f = job.wait(30s);
  EXPECT_NE((f.out + f.err).find("got SIGUSR1, asking every worker"), std::string::npos) << f.out << f.err;
  EXPECT_LT(f.seconds, 50) << "ended by the SIGTERM, long before the 60 s timeout";
  ASSERT_FALSE(d.findings.empty()) << text;
  EXPECT_EQ(d.findings.front().cause, "skip") << text;
  EXPECT_EQ(d.findings.front().culprits, std::vector<int>{1}) << text;
  EXPECT_EQ(d.findings.front().seq, 4u) << text;
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
