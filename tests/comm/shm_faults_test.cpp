// The same-host transport's faults (--backend auto, comm/shm_links.hpp): a
// rank killed in the middle of a message, killed while it sets up its
// segments, killed or stopped inside a collective (in the arena, in one
// copy, in an all-reduce of parts), and an all-reduce of parts meeting one
// of a tensor. The fault lands where the test says, shown by what the ranks
// print (tests/comm/shm_fault_scenarios.hpp), not by a clock; each one ends
// with the others naming the rank, within the transport's timeout, no
// segment of the job left in /dev/shm, and the next job on the host running.
//
// The ranks are started here, not by distlab-run, which would stop the
// others the moment one dies: each survivor must see it by itself. A rank
// is reaped the moment it ends, so that its peers find its process gone.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include "launcher_process.hpp"
#include "support/free_port.hpp"
#include "worker_runs.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using distlab::comm::testing::expect_every_rank_passed;
using distlab::comm::testing::run_worker;
using distlab::launcher::testing::read_file;

struct Ranks {
  std::vector<pid_t> pids;
  std::vector<std::string> out;  // each rank's stdout and stderr
  std::vector<int> exit_code;    // 128 + signal when a signal ended it
  std::vector<bool> stopped;     // found stopped, then killed here
  bool timed_out = false;
  std::string all() const {
    std::string text;
    for (size_t r = 0; r < out.size(); ++r) text += "--- rank " + std::to_string(r) + " ---\n" + out[r];
    return text;
  }
};

// `ranks` processes of comm_gloo_worker --backend auto `args`, one job on
// this host (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and `env` set for
// each). A rank found stopped stays so until every other one has ended, and
// is killed then. Past `limit`, every rank left is killed.
Ranks run_ranks(int ranks, const std::vector<std::string>& args, const std::vector<std::string>& env,
                std::chrono::milliseconds limit = 60s) {
  const std::string dir = distlab::launcher::testing::fresh_dir("shm_faults");
  const std::string port = std::to_string(distlab::test_support::free_port());
  Ranks r;
  r.out.resize(ranks);
  r.exit_code.assign(ranks, -1);
  r.stopped.assign(ranks, false);
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> argv{GLOO_WORKER_PATH, "--backend", "auto"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envs{"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(ranks),
                                  "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port};
    envs.insert(envs.end(), env.begin(), env.end());
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e, name = entry.substr(0, entry.find('=') + 1);
      bool given = false;
      for (const std::string& mine : envs) given = given || mine.rfind(name, 0) == 0;
      if (!given) envs.push_back(entry);
    }
    std::vector<char*> c_argv, c_env;
    for (auto& a : argv) c_argv.push_back(a.data());
    for (auto& e : envs) c_env.push_back(e.data());
    c_argv.push_back(nullptr);
    c_env.push_back(nullptr);
    const std::string out = dir + "/rank" + std::to_string(rank) + ".txt";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error(std::string("cannot start the worker: ") + std::strerror(rc));
    r.pids.push_back(pid);
  }
  std::vector<bool> ended(ranks, false);
  auto settle = [&](int rank, int status) {
    ended[rank] = true;
    r.exit_code[rank] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool waiting = false;
    for (int rank = 0; rank < ranks; ++rank) {
      if (ended[rank] || r.stopped[rank]) continue;
      int status = 0;
      if (waitpid(r.pids[rank], &status, WNOHANG | WUNTRACED) == r.pids[rank]) {
        if (WIFSTOPPED(status))
          r.stopped[rank] = true;
        else
          settle(rank, status);
      } else {
        waiting = true;
      }
    }
    if (!waiting) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  for (int rank = 0; rank < ranks; ++rank) {
    if (ended[rank]) continue;
    kill(r.pids[rank], SIGKILL);
    int status = 0;
    waitpid(r.pids[rank], &status, 0);
    settle(rank, status);
  }
  for (int rank = 0; rank < ranks; ++rank) r.out[rank] = read_file(dir + "/rank" + std::to_string(rank) + ".txt");
  return r;
}

// What the process `pid` left in /dev/shm ("distlab.<pid>.*", shm_segment.hpp).
std::vector<std::string> segments_of(pid_t pid) {
  std::vector<std::string> found;
  const std::string prefix = "distlab." + std::to_string(pid) + ".";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) found.push_back(entry.path().filename());
  return found;
}

void expect_no_segment_left(const Ranks& r) {
  for (size_t rank = 0; rank < r.pids.size(); ++rank)
    EXPECT_EQ(segments_of(r.pids[rank]), std::vector<std::string>{}) << "left by rank " << rank << "\n" << r.all();
}

// The next job on the host: set up afresh, an all-reduce and messages, checked.
void expect_the_next_job_runs() {
  expect_every_rank_passed(run_worker(2, "agree", "20000", 1, "auto"), 2);
}

std::string pid_text(const Ranks& r, int rank) { return std::to_string(r.pids[rank]); }

// The last of 3 ranks sends rank 0 64 MiB in two copies; rank 0 kills it
// once its ring shows part of the message read and more in flight, and says
// how much. Rank 0's recv, and rank 1's of a message never sent, end naming
// the dead rank and its process, well within their timeout (the message
// says which: an exit seen, not a wait that ran out).
TEST(ShmFaults, ARankKilledMidTransferIsNamedAndLeavesNoSegment) {
  Ranks r = run_ranks(3, {"--scenario", "killed"}, {"DISTLAB_TIMEOUT_MS=20000", "DISTLAB_SHM_SINGLE_COPY=0"});
  ASSERT_FALSE(r.timed_out) << r.all();
  std::smatch killed;
  const std::regex kill_line(R"(rank 0: killed rank 2 with (\d+) of 67108864 bytes read and (\d+) more)");
  ASSERT_TRUE(std::regex_search(r.out[0], killed, kill_line))
      << r.all();
  EXPECT_GT(std::stoll(killed[1]), 0);
  EXPECT_LT(std::stoll(killed[1]), 67108864);
  EXPECT_GT(std::stoll(killed[2]), 0);
  EXPECT_EQ(r.exit_code[2], 128 + SIGKILL) << r.all();
  const std::string gone = "rank 2 (process " + pid_text(r, 2) + " on this host) has exited";
  const size_t error0 = r.out[0].find("error: rank 0: recv from rank 2 (tag 3): " + gone);
  EXPECT_NE(error0, std::string::npos) << r.all();
  EXPECT_LT(static_cast<size_t>(killed.position(0)), error0) << r.all();
  EXPECT_NE(r.out[1].find("error: rank 1: recv from rank 2 (tag 5): " + gone), std::string::npos) << r.all();
  EXPECT_EQ(r.exit_code[0], 1);
  EXPECT_EQ(r.exit_code[1], 1);
  expect_no_segment_left(r);
  expect_the_next_job_runs();
}

// The last rank dies with the rings of the job's communicator created and
// named, not yet unlinked (its peers have not all mapped them): it leaves
// its segment behind, and the others' set-up ends naming it as soon as its
// process is gone, not when their wait runs out. The next job's set-up
// removes what the dead process left.
TEST(ShmFaults, ARankKilledInSetUpIsNamedAndTheNextJobRemovesItsSegment) {
  Ranks r = run_ranks(3, {"--scenario", "killed-in-setup"}, {"DISTLAB_TIMEOUT_MS=20000"});
  ASSERT_FALSE(r.timed_out) << r.all();
  std::smatch killed;
  ASSERT_TRUE(std::regex_search(r.out[2], killed,
                                std::regex("rank 2: killed with its segment (distlab\\." + pid_text(r, 2) +
                                           R"(\.[0-9a-f]+\.[0-9a-f]+\.r2) not yet unlinked)")))
      << r.all();
  const std::string left = killed[1];
  EXPECT_EQ(r.exit_code[2], 128 + SIGKILL) << r.all();
  for (int rank : {0, 1})
    EXPECT_NE(r.out[rank].find("error: rank " + std::to_string(rank) + ": shared memory: rank 2 (process " +
                               pid_text(r, 2) + " on this host) has exited before it could map this rank's rings"),
              std::string::npos)
        << r.all();
  for (int rank : {0, 1}) {
    EXPECT_EQ(r.exit_code[rank], 1) << r.all();
    EXPECT_EQ(segments_of(r.pids[rank]), std::vector<std::string>{}) << r.all();
  }
  expect_the_next_job_runs();
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + left)) << left;
}

// The last rank dies before it has created or published anything of the
// transport's, its pid included: the others cannot watch its process, so
// they wait out the set-up's timeout (DISTLAB_CONNECT_TIMEOUT_MS, 10 s
// here: long enough for three processes to start on a busy machine) for
// its page and end naming it; nothing of theirs is left in /dev/shm, and
// the next job runs.
TEST(ShmFaults, ARankKilledBeforeItsPageIsNamedWhenTheWaitRunsOut) {
  Ranks r = run_ranks(3, {"--scenario", "killed-before-page"},
                      {"DISTLAB_TIMEOUT_MS=3000", "DISTLAB_CONNECT_TIMEOUT_MS=10000"});
  ASSERT_FALSE(r.timed_out) << r.all();
  EXPECT_NE(r.out[2].find("rank 2: killed before publishing its process page"), std::string::npos) << r.all();
  EXPECT_EQ(r.exit_code[2], 128 + SIGKILL) << r.all();
  for (int rank : {0, 1}) {
    EXPECT_NE(r.out[rank].find("error: rank " + std::to_string(rank) +
                               ": shared memory: rank 2 on this host did not set up within 10000 ms"),
              std::string::npos)
        << r.all();
    EXPECT_EQ(r.exit_code[rank], 1) << r.all();
    EXPECT_EQ(segments_of(r.pids[rank]), std::vector<std::string>{}) << r.all();
  }
  expect_the_next_job_runs();
}

// Inside a collective of 3 ranks, the last one is killed (SIGKILL) or stops
// answering (SIGSTOP: alive, silent) after a barrier of it, as it prints.
// The path is shown first: a whole all-reduce, checked, takes 64 barriers in
// the arena (1 MiB in 32 KiB chunks, two each) and 3 in one copy.
struct Fault {
  std::string collective, fault;
};

void PrintTo(const Fault& f, std::ostream* os) { *os << f.collective << " " << f.fault; }

class ShmCollectiveFault : public testing::TestWithParam<Fault> {};

TEST_P(ShmCollectiveFault, TheOthersNameTheRankAndTheNextJobRuns) {
  const Fault f = GetParam();
  std::vector<std::string> env{"DISTLAB_TIMEOUT_MS=1500"};
  if (f.collective == "arena") env.push_back("DISTLAB_SHM_ARENA_KB=64");
  if (f.collective != "arena") env.push_back("DISTLAB_SHM_SINGLE_COPY=1");
  if (f.collective == "one-copy") env.push_back("DISTLAB_SHM_DIRECT_RANKS=3");
  Ranks r = run_ranks(3, {"--scenario", "collective-fault", "--collective", f.collective, "--fault", f.fault}, env);
  ASSERT_FALSE(r.timed_out) << r.all();
  const std::string barriers = f.collective == "arena" ? "64" : "3";
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(r.out[rank].find("rank " + std::to_string(rank) + ": the all_reduce took " + barriers + " barriers"),
              std::string::npos)
        << r.all();
  const std::string after = f.collective == "arena" ? "3" : "1";
  EXPECT_NE(r.out[2].find("rank 2: " + std::string(f.fault == "kill" ? "killed" : "stopped") +
                          " inside the all_reduce after its barrier " + after),
            std::string::npos)
      << r.all();
  EXPECT_EQ(r.stopped[2], f.fault == "stop") << r.all();
  // In one copy rank 0 finds the dead rank first, leaves and exits before
  // rank 1 reads its tensor or table (the scenario holds rank 1 back): rank
  // 1 must still name rank 2, not rank 0.
  if (f.fault == "kill" && f.collective != "arena")
    EXPECT_NE(r.out[1].find("rank 1: rank 0 has exited before rank 1 reads it"), std::string::npos) << r.all();
  EXPECT_EQ(r.exit_code[2], 128 + SIGKILL) << r.all();
  const std::string pid = pid_text(r, 2);
  for (int rank : {0, 1}) {
    const std::string me = "error: rank " + std::to_string(rank) + ": all_reduce";
    const std::regex named =
        f.fault == "kill"
            ? std::regex(me + ": (rank 2 \\(process " + pid + " on this host\\) has exited|reading rank 2's " +
                         "tensor \\(process " + pid + "\\): No such process)")
            : std::regex(me + " did not complete within 1500 ms\\. Not there yet: rank 2\n");
    EXPECT_TRUE(std::regex_search(r.out[rank], named)) << r.all();
    EXPECT_EQ(r.exit_code[rank], 1) << r.all();
  }
  EXPECT_EQ(r.all().find("MISMATCH"), std::string::npos) << r.all();
  expect_no_segment_left(r);
  expect_the_next_job_runs();
}

INSTANTIATE_TEST_SUITE_P(Shm, ShmCollectiveFault,
                         testing::Values(Fault{"arena", "kill"}, Fault{"arena", "stop"}, Fault{"one-copy", "kill"},
                                         Fault{"one-copy", "stop"}, Fault{"parts", "kill"}, Fault{"parts", "stop"}),
                         [](const testing::TestParamInfo<Fault>& info) {
                           std::string name = info.param.collective + "_" + info.param.fault;
                           name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                           return name;
                         });

// In one copy, rank 0 all-reduces a bucket's parts where they lie while rank
// 1 all-reduces one tensor of as many bytes: each finds that the other
// published something else, and says so naming it.
TEST(ShmFaults, AnAllReduceOfPartsMeetingOneOfATensorIsRefusedByBoth) {
  Ranks r = run_ranks(2, {"--scenario", "table-mismatch"}, {"DISTLAB_SHM_SINGLE_COPY=1", "DISTLAB_TIMEOUT_MS=5000"});
  ASSERT_FALSE(r.timed_out) << r.all();
  EXPECT_NE(r.out[0].find("error: rank 0: all_reduce: rank 1 is not all-reducing parts of 262144 bytes (its table "
                          "holds 0)"),
            std::string::npos)
      << r.all();
  EXPECT_NE(r.out[1].find("error: rank 1: all_reduce: rank 0 is all-reducing parts"), std::string::npos) << r.all();
  EXPECT_EQ(r.all().find("MISMATCH"), std::string::npos) << r.all();
  EXPECT_EQ(r.exit_code[0], 1);
  EXPECT_EQ(r.exit_code[1], 1);
  expect_no_segment_left(r);
  expect_the_next_job_runs();
}

}  // namespace
