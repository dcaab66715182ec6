// distlab-run end to end: the built launcher starts the test worker, and the
// tests read what the workers saw and what the launcher said.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "launcher_process.hpp"
#include "support/free_port.hpp"
#include "terminal_process.hpp"

namespace distlab::launcher::testing {
namespace {

using namespace std::chrono_literals;
using Vars = std::map<std::string, std::string>;
using test_support::free_port;

// distlab-run <launcher_flags> -- test_worker <worker_flags>
std::vector<std::string> job(std::vector<std::string> launcher_flags, const std::vector<std::string>& worker_flags) {
  launcher_flags.push_back("--");
  launcher_flags.push_back(TEST_WORKER_PATH);
  launcher_flags.insert(launcher_flags.end(), worker_flags.begin(), worker_flags.end());
  return launcher_flags;
}

// "[rank R] env A=1 B=2" lines, by R. The prefix's rank must be the RANK the
// worker saw.
std::map<int, Vars> env_lines(const std::string& out) {
  std::map<int, Vars> by_rank;
  std::regex line_re(R"(^\[rank (\d+)\] env (.*)$)");
  for (const auto& line : lines_of(out)) {
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) continue;
    Vars vars;
    std::istringstream words(m[2].str());
    for (std::string word; words >> word;) {
      auto eq = word.find('=');
      vars[word.substr(0, eq)] = word.substr(eq + 1);
    }
    int rank = std::stoi(m[1].str());
    EXPECT_EQ(vars["RANK"], std::to_string(rank)) << line;
    by_rank[rank] = vars;
  }
  return by_rank;
}

int count_lines_with(const std::string& text, const std::string& part) {
  int n = 0;
  for (const auto& line : lines_of(text)) n += line.find(part) != std::string::npos;
  return n;
}

pid_t recorded_pid(const std::string& dir, int rank, int restart) {
  return std::stoi(read_file(dir + "/started." + std::to_string(rank) + "." + std::to_string(restart)));
}

TEST(Launcher, OneNodeThreeProcessesGetTheirVariables) {
  int port = free_port();
  Finished f = run_launcher(
      job({"--nproc-per-node", "3", "--master-port", std::to_string(port), "--timeout-ms", "1234"}, {"--print-env"}),
      20s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.err;
  auto seen = env_lines(f.out);
  ASSERT_EQ(seen.size(), 3u) << f.out;
  for (int r = 0; r < 3; ++r) {
    Vars expected{{"RANK", std::to_string(r)},
                  {"WORLD_SIZE", "3"},
                  {"LOCAL_RANK", std::to_string(r)},
                  {"LOCAL_WORLD_SIZE", "3"},
                  {"GROUP_RANK", "0"},
                  {"GROUP_WORLD_SIZE", "1"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", std::to_string(port)},
                  {"RESTART_COUNT", "0"},
                  {"TORCHELASTIC_RESTART_COUNT", "0"},
                  {"TORCHELASTIC_MAX_RESTARTS", "0"},
                  {"DISTLAB_LAUNCHER", "1"},
                  {"DISTLAB_TIMEOUT_MS", "1234"}};
    EXPECT_EQ(seen[r], expected) << "rank " << r;
  }
}

// Two launchers on one machine, --nnodes 2, form one job of 4 ranks: the
// numbering is right and the ranks really meet at the master's port.
TEST(Launcher, TwoLaunchersActAsTwoNodes) {
  std::string port = std::to_string(free_port());
  auto flags = [&](int node) {
    return job({"--nnodes", "2", "--node-rank", std::to_string(node), "--nproc-per-node", "2", "--master-port", port},
               {"--print-env", "--rendezvous"});
  };
  std::string dir0 = fresh_dir("node0"), dir1 = fresh_dir("node1");
  LauncherProcess node1(flags(1), dir1);  // the later node first: ranks wait for rank 0
  LauncherProcess node0(flags(0), dir0);
  Finished f0 = node0.wait(20s), f1 = node1.wait(20s);
  ASSERT_FALSE(f0.timed_out || f1.timed_out) << f0.err << f1.err;
  EXPECT_EQ(f0.exit_code, 0) << f0.out << f0.err;
  EXPECT_EQ(f1.exit_code, 0) << f1.out << f1.err;

  auto on0 = env_lines(f0.out), on1 = env_lines(f1.out);
  EXPECT_EQ(on0.size(), 2u);
  EXPECT_EQ(on1.size(), 2u);
  for (int node = 0; node < 2; ++node) {
    for (int local = 0; local < 2; ++local) {
      int rank = node * 2 + local;
      Vars& v = (node == 0 ? on0 : on1)[rank];
      EXPECT_EQ(v["WORLD_SIZE"], "4");
      EXPECT_EQ(v["LOCAL_RANK"], std::to_string(local));
      EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "2");
      EXPECT_EQ(v["GROUP_RANK"], std::to_string(node));
      EXPECT_EQ(v["GROUP_WORLD_SIZE"], "2");
      EXPECT_EQ(v["MASTER_PORT"], port);
    }
  }
  EXPECT_NE(f0.out.find("[rank 0] rendezvous: ranks 1,2,3 joined rank 0"), std::string::npos) << f0.out;
  EXPECT_NE(f1.out.find("[rank 3] rendezvous: rank 3 reached rank 0"), std::string::npos) << f1.out;
}

TEST(Launcher, MasterPortZeroGivesTheWorkersARealFreePort) {
  Finished f = run_launcher(job({"--nproc-per-node", "3", "--master-port", "0"}, {"--print-env", "--rendezvous"}), 20s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  auto seen = env_lines(f.out);
  ASSERT_EQ(seen.size(), 3u);
  int port = std::stoi(seen[0]["MASTER_PORT"]);
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
  EXPECT_EQ(seen[1]["MASTER_PORT"], seen[0]["MASTER_PORT"]);
  EXPECT_EQ(seen[2]["MASTER_PORT"], seen[0]["MASTER_PORT"]);
  // Rank 0 could listen on it, so it was free.
  EXPECT_NE(f.out.find("rendezvous: ranks 1,2 joined rank 0 on port " + std::to_string(port)), std::string::npos)
      << f.out;
}

// Three workers print long lines through stdio, whose 4 KiB flushes cut
// lines anywhere; every line must still come out whole, once, in order.
TEST(Launcher, PrefixesEveryLineAndNeverMixesLines) {
  const int lines = 400;
  Finished f =
      run_launcher(job({"--nproc-per-node", "3"}, {"--lines", std::to_string(lines), "--stderr", "--partial"}), 30s);
  ASSERT_FALSE(f.timed_out) << f.err;
  ASSERT_EQ(f.exit_code, 0) << f.err;
  std::regex line_re(R"(^\[rank (\d)\] line (\d) (\d+) ([a-z]{200})$)");
  std::map<int, int> next_index;
  std::set<int> partial_seen;
  for (const auto& line : lines_of(f.out)) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) {
      int rank = std::stoi(m[1].str());
      EXPECT_EQ(m[2].str(), m[1].str()) << line;
      EXPECT_EQ(m[4].str(), std::string(200, static_cast<char>('a' + rank))) << "mixed line: " << line;
      EXPECT_EQ(std::stoi(m[3].str()), next_index[rank]++) << line;
      continue;
    }
    std::smatch p;
    ASSERT_TRUE(std::regex_match(line, p, std::regex(R"(^\[rank (\d)\] partial (\d)$)"))) << "bad line: " << line;
    EXPECT_EQ(p[1].str(), p[2].str());
    partial_seen.insert(std::stoi(p[1].str()));
  }
  for (int r = 0; r < 3; ++r) EXPECT_EQ(next_index[r], lines) << "rank " << r;
  EXPECT_EQ(partial_seen, (std::set<int>{0, 1, 2}));
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(count_lines_with(f.err, "[rank " + std::to_string(r) + "] to stderr from " + std::to_string(r)), 1)
        << f.err;
}

TEST(Launcher, NoPrefixPrintsTheLinesAsTheyAre) {
  Finished f = run_launcher(job({"--nproc-per-node", "2", "--no-prefix"}, {"--lines", "3"}), 20s);
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(f.exit_code, 0);
  EXPECT_EQ(f.out.find("[rank"), std::string::npos);
  EXPECT_EQ(count_lines_with(f.out, "line 1 2 "), 1) << f.out;
  EXPECT_EQ(lines_of(f.out).size(), 6u);
}

// Rank 1 fails after 300 ms; ranks 0 and 2 would sleep a minute. The
// launcher must stop them at once, not wait for them.
TEST(Launcher, FailingWorkerStopsTheOthersAndIsNamed) {
  std::string dir = fresh_dir("fail");
  Finished f = run_launcher(job({"--nproc-per-node", "3"}, {"--exit-code", "3", "--at-rank", "1", "--fail-after-ms",
                                                            "300", "--sleep-ms", "60000", "--record", dir}),
                            20s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_NE(f.exit_code, 0);
  EXPECT_LT(f.seconds, 4.0) << "the sleeping workers were waited for";
  EXPECT_EQ(count_lines_with(
                f.err, "distlab-run: rank 1 (pid " + std::to_string(recorded_pid(dir, 1, 0)) + ") exited with code 3"),
            1)
      << f.err;
  EXPECT_NE(f.err.find("job failed"), std::string::npos) << f.err;
  EXPECT_NE(f.out.find("[rank 1] failing with code 3"), std::string::npos);
  for (int r : {0, 2}) {
    EXPECT_EQ(read_file(dir + "/signal." + std::to_string(r) + ".0"), std::to_string(SIGTERM)) << "rank " << r;
    EXPECT_TRUE(process_gone(recorded_pid(dir, r, 0))) << "rank " << r;
  }
}

TEST(Launcher, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  std::string dir = fresh_dir("grace");
  Finished f = run_launcher(job({"--nproc-per-node", "2", "--grace-ms", "300"},
                                {"--exit-code", "5", "--at-rank", "0", "--fail-after-ms", "200", "--sleep-ms", "60000",
                                 "--ignore-sigterm", "--record", dir}),
                            20s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_NE(f.exit_code, 0);
  EXPECT_LT(f.seconds, 4.0);
  EXPECT_EQ(read_file(dir + "/signal.1.0"), std::to_string(SIGTERM));  // asked first,
  EXPECT_NE(f.err.find("rank 1 (pid " + std::to_string(recorded_pid(dir, 1, 0)) + ") still running 300 ms"),
            std::string::npos)
      << f.err;  // then killed
  EXPECT_TRUE(process_gone(recorded_pid(dir, 1, 0)));
}

TEST(Launcher, WorkerKilledBySignalIsNamed) {
  Finished f = run_launcher({"--nproc-per-node", "1", "--", "/bin/sh", "-c", "kill -SEGV $$"}, 20s);
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.err.find("rank 0 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find(") was killed by SIGSEGV"), std::string::npos) << f.err;
}

// Rank 2 fails while RESTART_COUNT < 2; the others run 1.5 s, so in a
// failing attempt they are still running and get stopped.
std::vector<std::string> fails_twice(int max_restarts, const std::string& dir) {
  return job({"--nproc-per-node", "3", "--max-restarts", std::to_string(max_restarts)},
             {"--print-env", "--exit-code", "4", "--at-rank", "2", "--until-restart", "2", "--fail-after-ms", "100",
              "--sleep-ms", "1500", "--record", dir});
}

TEST(Launcher, RestartsAllWorkersAndCountsThem) {
  std::string dir = fresh_dir("restart");
  Finished f = run_launcher(fails_twice(/*max_restarts=*/2, dir), 30s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(count_lines_with(f.err, "exited with code 4"), 2) << f.err;
  EXPECT_EQ(count_lines_with(f.err, "distlab-run: restarting all workers (restart 1 of 2)"), 1) << f.err;
  EXPECT_EQ(count_lines_with(f.err, "distlab-run: restarting all workers (restart 2 of 2)"), 1) << f.err;
  for (int restart = 0; restart < 3; ++restart) {
    for (int rank = 0; rank < 3; ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank) + " restart " + std::to_string(restart));
      std::string suffix = std::to_string(rank) + "." + std::to_string(restart);
      EXPECT_TRUE(std::filesystem::exists(dir + "/started." + suffix));
      // Stopped by the launcher in the failing attempts, never in the last.
      bool stopped = std::filesystem::exists(dir + "/signal." + suffix);
      EXPECT_EQ(stopped, restart < 2 && rank != 2);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/started.0.3"));
  // Each attempt's workers saw its count.
  for (int restart = 0; restart < 3; ++restart)
    EXPECT_EQ(count_lines_with(f.out, " RESTART_COUNT=" + std::to_string(restart) + " "), 3) << f.out;
}

TEST(Launcher, FailsWhenRestartsRunOut) {
  std::string dir = fresh_dir("restart_out");
  Finished f = run_launcher(fails_twice(/*max_restarts=*/1, dir), 30s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 1) << f.err;
  EXPECT_EQ(count_lines_with(f.err, "restarting all workers (restart 1 of 1)"), 1) << f.err;
  EXPECT_EQ(count_lines_with(f.err, "job failed: rank 2 (pid"), 1) << f.err;
  EXPECT_NE(f.err.find("no restarts left (--max-restarts 1)"), std::string::npos) << f.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/started.2.1"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/started.0.2"));
}

// A launcher whose `nproc` workers sleep a minute, returned once every
// worker has started (and set up its signal handlers).
std::unique_ptr<LauncherProcess> sleeping_job(int nproc, const std::string& dir, std::vector<std::string> flags = {}) {
  flags.insert(flags.begin(), {"--nproc-per-node", std::to_string(nproc)});
  auto launcher = std::make_unique<LauncherProcess>(job(flags, {"--sleep-ms", "60000", "--record", dir}), dir);
  for (int r = 0; r < nproc; ++r)
    EXPECT_TRUE(wait_for_file(dir + "/started." + std::to_string(r) + ".0", 10s)) << "rank " << r << " never started";
  return launcher;
}

// Ctrl-C reaches the launcher only (workers are in their own process
// groups); it forwards SIGINT to each worker and exits 130.
TEST(Launcher, SigintIsForwardedAndStopsTheWorkers) {
  std::string dir = fresh_dir("sigint");
  auto launcher = sleeping_job(3, dir);
  ::kill(launcher->pid(), SIGINT);
  Finished f = launcher->wait(10s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 130) << f.err;
  EXPECT_NE(f.err.find("distlab-run: got SIGINT, forwarding it to all workers"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("restarting"), std::string::npos) << f.err;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(read_file(dir + "/signal." + std::to_string(r) + ".0"), std::to_string(SIGINT)) << "rank " << r;
    EXPECT_TRUE(process_gone(recorded_pid(dir, r, 0))) << "rank " << r;
  }
}

TEST(Launcher, SigtermToTheLauncherStopsTheWorkersToo) {
  std::string dir = fresh_dir("sigterm");
  auto launcher = sleeping_job(2, dir, {"--max-restarts", "3"});
  ::kill(launcher->pid(), SIGTERM);
  Finished f = launcher->wait(10s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 128 + SIGTERM) << f.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/started.0.1")) << "an interrupted job must not restart";
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(process_gone(recorded_pid(dir, r, 0)));
}

// SIGUSR1 asks every worker for its flight recorder's file. A worker that
// has not installed its handler yet (a DistLab program loading LibTorch in
// its first second, or a program with none) must not die of it: workers
// start with SIGUSR1 ignored, and a program's own handler replaces that.
TEST(Launcher, Sigusr1BeforeAWorkerHandlesItDoesNotKillIt) {
  std::string dir = fresh_dir("sigusr1_early");
  const std::string started = dir + "/started";
  LauncherProcess launcher({"--nproc-per-node", "2", "--master-port", "0", "--", "/bin/sh", "-c",
                            "touch " + started + ".$RANK; sleep 1; echo alive"},
                           dir);
  for (int r = 0; r < 2; ++r)
    ASSERT_TRUE(wait_for_file(started + "." + std::to_string(r), 10s)) << "rank " << r << " never started";
  ::kill(launcher.pid(), SIGUSR1);
  Finished f = launcher.wait(20s);
  ASSERT_FALSE(f.timed_out) << f.err;
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.err.find("got SIGUSR1, asking every worker"), std::string::npos) << f.err;
  EXPECT_NE(f.out.find("[rank 0] alive"), std::string::npos) << f.out << f.err;
  EXPECT_NE(f.out.find("[rank 1] alive"), std::string::npos) << f.out << f.err;
}

// No orphans: a launcher killed outright takes its workers with it.
TEST(Launcher, KilledLauncherTakesItsWorkersAlong) {
  std::string dir = fresh_dir("sigkill");
  auto launcher = sleeping_job(2, dir);
  ::kill(launcher->pid(), SIGKILL);
  launcher->wait(10s);
  for (int r = 0; r < 2; ++r) {
    pid_t pid = recorded_pid(dir, r, 0);
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!process_gone(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(process_gone(pid)) << "rank " << r << " outlived its launcher";
  }
}

TEST(Launcher, ProgramThatCannotRunGivesOneClearLine) {
  std::string dir = fresh_dir("noexec");
  std::string plain_file = dir + "/not_a_program";
  { std::ofstream(plain_file) << "data\n"; }
  ::chmod(plain_file.c_str(), 0644);
  struct Case {
    std::string program, message;
  };
  for (const auto& c : std::vector<Case>{
           {"/no/such/program", "distlab-run: cannot run '/no/such/program': no such file"},
           {plain_file, "distlab-run: cannot run '" + plain_file + "': not executable"},
           {"distlab-no-such-command", "distlab-run: cannot run 'distlab-no-such-command': not found in PATH"},
       }) {
    Finished f = run_launcher({"--nproc-per-node", "2", c.program}, 10s);
    ASSERT_FALSE(f.timed_out);
    EXPECT_EQ(f.exit_code, 127) << c.program;
    EXPECT_EQ(lines_of(f.err).size(), 1u) << f.err;
    EXPECT_EQ(f.err.rfind(c.message, 0), 0u) << f.err;
  }
}

// Passes the launcher's PATH checks but fails in execve: reported the same way.
TEST(Launcher, ExecFailureIsReportedFromTheChild) {
  std::string dir = fresh_dir("badexec");
  std::string script = dir + "/bad_interpreter";
  { std::ofstream(script) << "#!/no/such/interpreter\n"; }
  ::chmod(script.c_str(), 0755);
  Finished f = run_launcher({"--nproc-per-node", "2", script}, 10s);
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(f.exit_code, 127);
  EXPECT_EQ(lines_of(f.err).size(), 1u) << f.err;
  EXPECT_NE(f.err.find("cannot run '" + script + "': No such file or directory"), std::string::npos) << f.err;
}

TEST(Launcher, BadFlagsExitWithUsageError) {
  Finished f = run_launcher({"--nnodes", "2", "--master-port", "0", TEST_WORKER_PATH}, 10s);
  ASSERT_FALSE(f.timed_out);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_EQ(lines_of(f.err).size(), 1u) << f.err;
  EXPECT_EQ(f.err.rfind("distlab-run: --master-port 0 picks a free port on this node only", 0), 0u) << f.err;
  Finished unresolvable = run_launcher({"--master-addr", "no-such-host.invalid", TEST_WORKER_PATH}, 10s);
  EXPECT_EQ(unresolvable.exit_code, 127);
  EXPECT_NE(unresolvable.err.find("--master-addr 'no-such-host.invalid' does not resolve"), std::string::npos)
      << unresolvable.err;
}

// Started from a terminal, the launcher passes what is typed there to global
// rank 0 alone, through a pipe, and tells it so (DISTLAB_STEP_WAIT=1); the
// others read /dev/null. Ctrl-D closes rank 0's pipe.
TEST(Launcher, ForwardsItsTerminalToRankZeroOnly) {
  TerminalProcess launcher(job({DISTLAB_RUN_PATH, "--nproc-per-node", "3", "--master-port", "0"},
                               {"--stdin", "--read-stdin"}));
  ASSERT_TRUE(launcher.wait_for("[rank 2] rank 2 read: end of input", 20s)) << launcher.output();
  EXPECT_TRUE(launcher.wait_for("[rank 1] rank 1 read: end of input", 5s)) << launcher.output();
  EXPECT_TRUE(launcher.wait_for("[rank 0] stdin 0: pipe DISTLAB_STEP_WAIT=1\n", 5s)) << launcher.output();
  for (int r : {1, 2})
    EXPECT_NE(launcher.output().find("stdin " + std::to_string(r) + ": /dev/null DISTLAB_STEP_WAIT=<unset>\n"),
              std::string::npos)
        << launcher.output();
  EXPECT_EQ(launcher.output().find("rank 0 read: end of input"), std::string::npos) << launcher.output();
  launcher.type("hello rank 0\n");
  EXPECT_TRUE(launcher.wait_for("[rank 0] rank 0 read: hello rank 0\n", 10s)) << launcher.output();
  launcher.type("\x04");  // Ctrl-D
  EXPECT_TRUE(launcher.wait_for("[rank 0] rank 0 read: end of input\n", 10s)) << launcher.output();
  EXPECT_EQ(launcher.wait_exit(20s), 0) << launcher.output();
  EXPECT_EQ(count_lines_with(launcher.output(), "read: hello"), 1) << launcher.output();
}

// Without a terminal every worker, rank 0 too, reads /dev/null.
TEST(Launcher, WithoutATerminalEveryWorkerReadsDevNull) {
  Finished f = run_launcher(job({"--nproc-per-node", "2", "--master-port", "0"}, {"--stdin", "--read-stdin"}), 20s);
  ASSERT_FALSE(f.timed_out) << f.err;
  ASSERT_EQ(f.exit_code, 0) << f.err;
  for (int r : {0, 1}) {
    const std::string rank = std::to_string(r);
    EXPECT_EQ(count_lines_with(f.out, "[rank " + rank + "] stdin " + rank + ": /dev/null DISTLAB_STEP_WAIT=<unset>"), 1)
        << f.out;
    EXPECT_EQ(count_lines_with(f.out, "[rank " + rank + "] rank " + rank + " read: end of input"), 1) << f.out;
  }
}

}  // namespace
}  // namespace distlab::launcher::testing
