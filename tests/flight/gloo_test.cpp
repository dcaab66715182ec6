// The flight recorder across gloo processes started by distlab-run: each
// injected fault (faults.hpp: skip, order, shape, p2p, and a rank
// SIGKILLed in the middle of the job) ends within its timeout and is
// diagnosed from the files, with the same checks as on thread ranks
// (fault_checks.hpp); p2p, shape and the killed rank again over shared
// memory (--backend auto), where the same records come from the rings; SIGUSR1 to the launcher while the job hangs; the
// launcher's exit records (exit status in the diagnosis, written where the
// workers' flight files go, earlier ones removed).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "fault_checks.hpp"
#include "flight/exit_file.hpp"
#include "flight/why.hpp"
#include "launcher_process.hpp"

namespace {

using namespace std::chrono_literals;
using distlab::launcher::testing::Finished;
using namespace distlab::flight_test;
namespace flight = distlab::flight;

// Three ranks, a 2 s timeout, the flight files into `dir`; `backend` gloo
// (TCP) or auto (shared memory: the same host).
Finished run_fault(const std::string& fault, int culprit, const std::string& dir, const std::string& backend = "gloo") {
  setenv("DISTLAB_FLIGHT_DIR", dir.c_str(), 1);
  Finished f = distlab::launcher::testing::run_launcher(
      {"--nproc-per-node", "3", "--master-port", "0", "--timeout-ms", "2000", "--grace-ms", "5000", FLIGHT_WORKER_PATH,
       "--backend", backend, "--fault", fault, "--culprit", std::to_string(culprit)},
      90s);
  unsetenv("DISTLAB_FLIGHT_DIR");
  return f;
}

// The job failed on its own, long before the test's limit.
void expect_failed_in_time(const Finished& f) {
  EXPECT_FALSE(f.timed_out) << f.out << f.err;
  EXPECT_NE(f.exit_code, 0) << f.out << f.err;
  EXPECT_LT(f.seconds, 30) << f.out << f.err;
}

// The pid distlab-run printed for `rank` in "rank 2 (pid 812) was killed by ...".
int pid_printed_for(const Finished& f, int rank) {
  const std::string text = f.out + f.err;
  const std::string lead = "distlab-run: rank " + std::to_string(rank) + " (pid ";
  const size_t at = text.find(lead);
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + lead.size());
}

// True once `launcher` has `workers` children and each catches SIGUSR1
// (flight::dump_on_signals ran), read from /proc; false after `limit`.
bool workers_catch_sigusr1(pid_t launcher, int workers, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const std::string proc = "/proc/" + std::to_string(launcher);
  for (; std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
    std::ifstream children(proc + "/task/" + std::to_string(launcher) + "/children");
    int ready = 0;
    for (pid_t child; children >> child;) {
      std::ifstream status("/proc/" + std::to_string(child) + "/status");
      for (std::string line; std::getline(status, line);)
        if (line.rfind("SigCgt:", 0) == 0 && (std::stoull(line.substr(7), nullptr, 16) >> (SIGUSR1 - 1) & 1) != 0)
          ++ready;
    }
    if (ready == workers) return true;
  }
  return false;
}

TEST(FlightGloo, SkippedCollectiveIsFoundAcrossProcesses) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_skip");
  const Finished f = run_fault("skip", 1, dir);
  expect_failed_in_time(f);
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  expect_skip(d, 1, "ranks 0, 2");
  EXPECT_TRUE(contains(text, "read 3 flight file(s): ranks 0-2 of 3")) << text;
  std::printf("%s", text.c_str());
}

TEST(FlightGloo, CollectivesInAnotherOrderAcrossProcesses) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_order");
  const Finished f = run_fault("order", 2, dir);
  expect_failed_in_time(f);
  const auto d = flight::diagnose_files({dir});
  expect_order(d, 2, "ranks 0, 1");
  std::printf("%s", flight::to_text(d).c_str());
}

TEST(FlightGloo, AnotherShapeAcrossProcesses) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_shape");
  const Finished f = run_fault("shape", 2, dir);
  expect_failed_in_time(f);
  const auto d = flight::diagnose_files({dir});
  expect_shape(d, 2, "ranks 0, 1");
  std::printf("%s", flight::to_text(d).c_str());
}

TEST(FlightGloo, ARecvWhoseMessageNeverComesAcrossProcesses) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_p2p");
  const Finished f = run_fault("p2p", 2, dir);
  expect_failed_in_time(f);
  const auto d = flight::diagnose_files({dir});
  expect_p2p(d, 2, 3);
  std::printf("%s", flight::to_text(d).c_str());
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
  // SIGUSR1 before a worker set up its handler would kill it, and one
  // before its communicator exists finds nothing to write. The ranks reach
  // #4 well under a second after they start, which on a busy machine may be
  // seconds after the launcher does: ask once a second until two looks at
  // all three files agree (each dump replaces the last, whole), as a person
  // would.
  ASSERT_TRUE(workers_catch_sigusr1(job.pid(), 3, 30s)) << t::read_file(dir + "/launcher.err");
  flight::Diagnosis d;
  std::string previous;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    kill(job.pid(), SIGUSR1);
    std::this_thread::sleep_for(1s);
    d = flight::diagnose_files({dir});
    const std::string now = flight::to_text(d);
    if (now == previous && d.summary.rfind("read 3 ", 0) == 0 && d.findings.front().cause != "none") break;
    previous = now;
  }
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(std::ifstream(dir + "/flight.rank" + std::to_string(r) + ".json").good()) << "rank " << r;
  const std::string text = flight::to_text(d);
  kill(job.pid(), SIGTERM);
  const Finished f = job.wait(30s);
  EXPECT_NE((f.out + f.err).find("got SIGUSR1, asking every worker"), std::string::npos) << f.out << f.err;
  EXPECT_LT(f.seconds, 50) << "ended by the SIGTERM, long before the 60 s timeout";
  ASSERT_FALSE(d.findings.empty()) << text;
  EXPECT_EQ(d.findings.front().cause, "skip") << text;
  EXPECT_EQ(d.findings.front().culprits, std::vector<int>{1}) << text;
  EXPECT_EQ(d.findings.front().seq, 4u) << text;
  EXPECT_EQ(d.exits, "") << "nothing had ended when the files were read";
  std::printf("%s", text.c_str());
}

TEST(FlightGloo, SigkilledRankIsNamedWithItsExitStatusFromTheLaunchersRecord) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_dead");
  const Finished f = run_fault("dead", 2, dir);
  expect_failed_in_time(f);
  EXPECT_TRUE(contains(f.out + f.err, "was killed by SIGKILL")) << f.out << f.err;
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  expect_dead(d, 2, {0, 1});
  EXPECT_TRUE(contains(text, "read 2 flight file(s): ranks 0, 1 of 3; none from rank 2")) << text;
  EXPECT_TRUE(contains(text, "rank 2 left the job (killed by SIGKILL, exit 137) without a flight file:")) << text;
  // Rank 2 ended first; the others after distlab-run stopped them.
  EXPECT_EQ(d.exits.rfind("exits seen by distlab-run: rank 2 (killed by SIGKILL, exit 137); ", 0), 0u) << text;

  // The record itself, against what the launcher printed.
  const flight::ExitRecord r = flight::read_exit(flight::exit_path(dir, 2));
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 3);
  EXPECT_EQ(r.pid, pid_printed_for(f, 2)) << f.err;
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.signal, "SIGKILL");
  EXPECT_FALSE(r.asked_to_stop);
  EXPECT_EQ(r.restart, 0);
  std::printf("%s", text.c_str());
}

// Without DISTLAB_FLIGHT_DIR, `flight_worker ARGS --trace DIR/trace.json`
// on three ranks; the workers then write their flight files into DIR.
Finished run_traced(const std::string& dir, const std::vector<std::string>& args) {
  const char* saved = std::getenv("DISTLAB_FLIGHT_DIR");
  const std::string saved_value = saved ? saved : "";
  unsetenv("DISTLAB_FLIGHT_DIR");
  std::vector<std::string> command = {"--nproc-per-node", "3",       "--master-port",    "0",
                                      "--timeout-ms",     "2000",    "--grace-ms",       "5000",
                                      FLIGHT_WORKER_PATH, "--trace", dir + "/trace.json"};
  command.insert(command.end(), args.begin(), args.end());
  const Finished f = distlab::launcher::testing::run_launcher(command, 90s);
  if (saved) setenv("DISTLAB_FLIGHT_DIR", saved_value.c_str(), 1);
  return f;
}

// The launcher finds the workers' directory by their rule: next to the
// --trace file.
TEST(FlightGloo, ExitRecordsGoWhereTheWorkersFlightFilesGo) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_trace_dir");
  const Finished f = run_traced(dir, {"--fault", "dead", "--culprit", "2"});
  expect_failed_in_time(f);
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  expect_dead(d, 2, {0, 1});
  EXPECT_TRUE(contains(text, "rank 2 left the job (killed by SIGKILL, exit 137) without a flight file:")) << text;
}

// A record left by an earlier job is removed when the workers start: a job
// whose ranks all end well leaves none.
TEST(FlightGloo, RecordsOfAnEarlierJobAreRemovedAtTheStart) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_gloo_stale");
  std::ofstream(flight::exit_path(dir, 1))
      << "{\"format\": \"distlab-flight-exit\", \"version\": 1, \"rank\": 1, \"world_size\": 3, \"pid\": 1, "
         "\"host\": \"old\", \"restart\": 0, \"exit_code\": 9, \"signal\": \"\", \"asked_to_stop\": false, "
         "\"unix_us\": 1}\n";
  ASSERT_TRUE(std::ifstream(flight::exit_path(dir, 1)).good());
  const Finished f = run_traced(dir, {"--fault", "skip", "--culprit", "3"});  // rank 3 of 3: no fault
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  for (int r = 0; r < 3; ++r)
    EXPECT_FALSE(std::ifstream(flight::exit_path(dir, r)).good()) << "rank " << r << "'s record is still there";
}

// Over shared memory (--backend auto): the records are the communicator's,
// whatever carries the bytes, so the same faults read the same. Runs the
// fault, checks the job failed in time on shared memory (its stderr line),
// and returns the diagnosis of its files.
flight::Diagnosis diagnose_over_shared_memory(const std::string& fault) {
  const std::string dir = distlab::launcher::testing::fresh_dir("flight_shm_" + fault);
  const Finished f = run_fault(fault, 2, dir, "auto");
  expect_failed_in_time(f);
  EXPECT_TRUE(contains(f.err, "3 rank(s) on this host talk through shared memory")) << f.err;
  flight::Diagnosis d = flight::diagnose_files({dir});
  std::printf("%s", flight::to_text(d).c_str());
  return d;
}

TEST(FlightShm, ARecvWhoseMessageNeverComesOverSharedMemory) {
  expect_p2p(diagnose_over_shared_memory("p2p"), 2, 3);
}

TEST(FlightShm, AnotherShapeOverSharedMemory) {
  expect_shape(diagnose_over_shared_memory("shape"), 2, "ranks 0, 1");
}

TEST(FlightShm, SigkilledRankOverSharedMemory) {
  const flight::Diagnosis d = diagnose_over_shared_memory("dead");
  expect_dead(d, 2, {0, 1});
  const std::string text = flight::to_text(d);
  EXPECT_TRUE(contains(text, "rank 2 left the job (killed by SIGKILL, exit 137) without a flight file:")) << text;
}

}  // namespace
