// Launchers nobody here wrote: PyTorch's torchrun (its agent hosts the store;
// the ranks join as clients under /worker/attempt_<n>; a failing rank's
// error reaches torchrun's summary through TORCHELASTIC_ERROR_FILE) and
// Open MPI's mpirun. Skipped, with the reason, where the launcher is not
// installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>

#include "comm/error_file.hpp"
#include "comm/errors.hpp"
#include "run_command.hpp"
#include "support/required_tool.hpp"
#include "support/small_corpus.hpp"

namespace distlab::train {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::Outcome;
using testing::run_command;
using testing::run_on_free_port;

const std::string kTorchrun = "/usr/bin/torchrun";
// Lesson 05 over gloo's TCP, or over shared memory (--backend auto).
std::string lesson05(const std::string& backend = "gloo") {
  return std::string(LESSON_05) + " --backend " + backend + " --mb 1 --iters 2 --no-steps --timeout-ms 20000";
}
const std::string kLesson05 = lesson05();

std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("distlab_launchers_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// The #wrong column (the last) of lesson 05's table rows, whatever prefix
// the launcher puts before each line.
std::vector<long long> wrong_column(const std::string& output) {
  static const std::regex row(R"(^.*  (reduce_broadcast|ring|halving_doubling|native)\s.*\s(\d+)$)");
  std::vector<long long> counts;
  for (const auto& line : testing::lines_of(output)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) counts.push_back(std::stoll(m[2]));
  }
  return counts;
}

// Lesson 05's all-reduces came out right on 2 ranks of `backend`.
void expect_lesson05_passed(const Outcome& r, const std::string& backend) {
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "Lesson 05: all-reduce  (" + backend + " backend, 2 ranks, op sum)")) << r.output;
  if (backend == "shm") EXPECT_TRUE(contains(r.output, "2 rank(s) on this host talk through shared memory")) << r.output;
  const auto wrong = wrong_column(r.output);
  ASSERT_EQ(wrong.size(), 4u) << r.output;
  for (long long w : wrong) EXPECT_EQ(w, 0) << r.output;
}

std::string torchrun(const std::string& dir, const std::string& port, const std::string& flags) {
  return kTorchrun + " --redirects 1 --tee 1 --monitor_interval 1 --log_dir " + dir + "/logs --master_port " + port +
         " " + flags + " --no_python ";
}

TEST(Torchrun, Lesson05RunsWithTheAgentsStore) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(fs::exists(kTorchrun),
                               kTorchrun + " is not installed (apt-get install python3-torch)");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) { return torchrun(fresh_dir("lesson05"), port, "--nproc_per_node 2") + kLesson05; },
      90);
  EXPECT_FALSE(contains(r.output, "Address already in use")) << r.output;
  expect_lesson05_passed(r, "gloo");
}

// The same-host transport under torchrun: the host identities and the
// segments' names go through the agent's store.
TEST(Torchrun, Lesson05RunsOverSharedMemory) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(fs::exists(kTorchrun),
                               kTorchrun + " is not installed (apt-get install python3-torch)");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        return torchrun(fresh_dir("lesson05_shm"), port, "--nproc_per_node 2") + lesson05("auto");
      },
      90);
  expect_lesson05_passed(r, "shm");
}

// Combinations of experts the plan once refused, as gloo processes: spread
// over 2 context ranks (each routing its own tokens, the all-to-alls between
// them) under the real torchrun, and spread over 2 replicas of a stage cut
// across 2 tensor ranks (each tensor rank its own expert groups) under
// distlab-run. Each ends with the digest of the same training on thread
// ranks in one process.
TEST(Torchrun, CapstoneExpertsOnContextAndTensorRanksEqualThreadRanks) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(fs::exists(kTorchrun),
                               kTorchrun + " is not installed (apt-get install python3-torch)");
  const std::string training = std::string(LESSON_11) + " --data " + test_support::small_corpus_folder() +
                               " --preset tiny --epochs 1 --batches-per-epoch 3 --eval-batches 2 --experts 4"
                               " --dropout 0 --pipeline 1 --expert-parallel 2 --timeout-ms 30000";
  struct Case {
    std::string dimensions;
    int ranks;
    bool under_torchrun;
  };
  for (const Case& c : {Case{"--replicas 1 --context 2", 2, true}, Case{"--replicas 2 --tensor 2", 4, false}}) {
    const std::string run = training + " " + c.dimensions;
    const Outcome threads = run_command(run + " --backend threads", 120);
    const auto expected = testing::digests(threads.output);
    ASSERT_EQ(expected.size(), 1u) << threads.output;
    const std::string n = std::to_string(c.ranks);
    const Outcome processes = run_on_free_port(
        [&](const std::string& port) {
          return (c.under_torchrun ? torchrun(fresh_dir("experts"), port, "--nproc_per_node " + n)
                                   : std::string(DISTLAB_RUN) + " --nproc-per-node " + n + " --master-port " + port +
                                         " -- ") +
                 run + " --backend gloo";
        },
        120);
    ASSERT_EQ(processes.status, 0) << processes.output;
    EXPECT_EQ(testing::digests(processes.output), expected) << c.dimensions << "\n" << processes.output;
    std::printf("  experts spread over 2 ranks with %s: digest %s on thread ranks and on gloo processes under %s\n",
                c.dimensions.c_str(), expected[0].c_str(), c.under_torchrun ? "torchrun" : "distlab-run");
  }
}

// torchrun's summary names the exception the rank threw, read from the
// error file the rank wrote, as the root cause.
TEST(Torchrun, FailureSummaryNamesTheRealError) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(fs::exists(kTorchrun),
                               kTorchrun + " is not installed (apt-get install python3-torch)");
  const std::string dir = fresh_dir("error_file");
  const Outcome r = run_on_free_port(
      [&](const std::string& port) {
        fs::remove_all(dir + "/ckpt");
        return torchrun(dir, port, "--nproc_per_node 2 --max_restarts 0") + LESSON_09 +
               " --backend gloo --steps 10 --timeout-ms 20000 --checkpoint-dir " + dir +
               "/ckpt --kill-rank 1 --kill-at-step 3 --fail-how throw";
      },
      90);
  EXPECT_NE(r.status, 0) << r.output;
  const auto root = r.output.find("Root Cause (first observed failure)");
  ASSERT_NE(root, std::string::npos) << r.output;
  // The root cause is the rank that threw, not rank 0 that lost its peer.
  EXPECT_TRUE(contains(r.output.substr(root),
                       "traceback : std::runtime_error: rank 1: failing on purpose at step 3 (--fail-how throw)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "C++ exception in lesson_09_failover_checkpoint")) << r.output;
  EXPECT_FALSE(contains(r.output, "error_file: <N/A>\n  traceback : To enable traceback")) << r.output;
}

// The file a rank writes is the one PyTorch's own reader parses.
TEST(ErrorFile, PyTorchsReaderParsesIt) {
  const std::string dir = fresh_dir("error_json");
  const std::string path = dir + "/error.json";
  const comm::TimeoutError error("rank 1: recv from rank 0 (tag 3) \"quoted\"\ttimed out after 5 ms");
  EXPECT_EQ(comm::record_error(error, "prog", {{"TORCHELASTIC_ERROR_FILE", path}}), path);
  EXPECT_EQ(comm::record_error(error, "prog", {}), "");  // no variable, no file
  const std::string script = dir + "/read.py";
  std::ofstream(script) << R"PY(
import sys, time
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
f = ProcessFailure(local_rank=1, pid=42, exitcode=1, error_file=sys.argv[1])
print("message:", f.message["message"])
print("callstack:", f.message["extraInfo"]["py_callstack"].replace("\n", " | "))
print("recent:", abs(f.timestamp - time.time()) < 600)
)PY";
  const Outcome r = run_command("/usr/bin/python3 " + script + " " + path, 60);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "message: distlab::comm::TimeoutError: rank 1: recv from rank 0 (tag 3) \"quoted\"\t"
                                 "timed out after 5 ms\n"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "callstack: distlab::comm::TimeoutError: rank 1:")) << r.output;
  EXPECT_TRUE(contains(r.output, "| (C++ exception in prog; no Python stack)")) << r.output;
  EXPECT_TRUE(contains(r.output, "recent: True")) << r.output;
}

// Over gloo's TCP, then over shared memory.
TEST(Mpirun, Lesson05RunsUnderOpenMpi) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(run_command("command -v mpirun", 10).status == 0,
                               "mpirun is not installed (apt-get install openmpi-bin)");
  // Open MPI refuses root unless told; --oversubscribe: 2 ranks on fewer cores.
  for (const std::string backend : {"gloo", "auto"}) {
    const Outcome r = run_on_free_port(
        [&](const std::string& port) {
          return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MASTER_PORT=" + port +
                 " mpirun --allow-run-as-root --oversubscribe -np 2 " + lesson05(backend);
        },
        90);
    expect_lesson05_passed(r, backend == "auto" ? "shm" : backend);
  }
}

}  // namespace
}  // namespace distlab::train
