// Every trace a lesson, the capstone and the benchmarks write opens right in
// Perfetto: on each thread track the complete events nest or stay apart
// (Perfetto draws partly overlapping ones wrong), and each send->recv arrow
// lands on its own send and recv. Processes under distlab-run write one file
// each; those are checked one by one and merged by distlab-trace, whose
// output is checked too. The check reads the files' JSON itself
// (tests/support/perfetto_tracks.hpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "run_program.hpp"
#include "support/perfetto_tracks.hpp"
#include "support/small_corpus.hpp"

namespace {

using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::run;

struct TracedRun {
  std::string name;
  std::string program;    // the built program
  std::string flags;      // without --trace; {dir} is the run's own folder, {corpus} the small corpus
  int processes = 0;      // > 0: under distlab-run, one file per process
  size_t min_events = 1;  // a run that traced nothing would prove nothing
};

std::string folder_for(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "perfetto_" + std::to_string(getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Checks one file; returns its complete events.
size_t expect_nested(const std::string& path) {
  const distlab::test_support::TrackReport report = distlab::test_support::check_tracks(path);
  EXPECT_EQ(report.partial_overlaps, 0u) << path << ": " << report.first_problem;
  EXPECT_EQ(report.misplaced_flows, 0u) << path << ": " << report.first_problem;
  return report.complete;
}

void PrintTo(const TracedRun& t, std::ostream* os) { *os << t.name; }

// Every trace file the run left in `dir` (lesson 10 writes one per
// schedule, processes one per rank), in name order.
std::vector<std::string> traces_in(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

class PerfettoTraces : public ::testing::TestWithParam<TracedRun> {};

TEST_P(PerfettoTraces, EveryTrackNestsAndEveryArrowLandsOnItsSlice) {
  const TracedRun& t = GetParam();
  const std::string dir = folder_for(t.name);
  const std::string trace = dir + "/trace.json";
  std::string flags = t.flags;
  for (size_t at; (at = flags.find("{dir}")) != std::string::npos;) flags.replace(at, 5, dir);
  for (size_t at; (at = flags.find("{corpus}")) != std::string::npos;)
    flags.replace(at, 8, distlab::test_support::small_corpus_folder());
  const std::string command =
      t.processes > 0 ? std::string(DISTLAB_RUN) + " --nproc-per-node " + std::to_string(t.processes) +
                            " --master-port 0 --no-prefix -- " + t.program + " " + flags + " --trace " + trace
                      : t.program + " " + flags + " --trace " + trace;
  const Outcome r = run(command, "< /dev/null");
  ASSERT_EQ(r.status, 0) << command << "\n" << r.output;
  const std::vector<std::string> files = traces_in(dir);
  ASSERT_FALSE(files.empty()) << command << "\n" << r.output;
  size_t total = 0;
  for (const std::string& file : files) total += expect_nested(file);
  EXPECT_GE(total, t.min_events) << command;
  if (t.processes == 0) return;
  ASSERT_EQ(files.size(), static_cast<size_t>(t.processes)) << r.output;
  std::string inputs;
  for (const std::string& file : files) inputs += " " + file;
  const std::string merged = dir + "/merged.json.out";
  const Outcome m = run(std::string(DISTLAB_TRACE) + " merge -o " + merged + inputs);
  ASSERT_EQ(m.status, 0) << m.output;
  EXPECT_EQ(expect_nested(merged), total);
}

const std::string kCapstone =
    "--data {corpus} --preset tiny --dropout 0 --epochs 1 --batches-per-epoch 3 --eval-batches 2";

INSTANTIATE_TEST_SUITE_P(
    Lessons, PerfettoTraces,
    ::testing::Values(
        TracedRun{"lesson01", LESSON_01, "--backend threads --ranks 4", 0, 4},
        TracedRun{"lesson02", LESSON_02, "--backend threads --ranks 4 --iters 1", 0, 8},
        TracedRun{"lesson03", LESSON_03, "--backend threads --ranks 4 --iters 1", 0, 8},
        TracedRun{"lesson04", LESSON_04, "--backend threads --ranks 4 --iters 1", 0, 8},
        // Four threads, 1 MB: a ring step's send starts inside its recv.
        TracedRun{"lesson05", LESSON_05, "--backend threads --ranks 4 --mb 1 --iters 1 --no-steps", 0, 100},
        TracedRun{"lesson05_gloo", LESSON_05, "--backend gloo --mb 0.2 --iters 1 --no-steps", 3, 50},
        // The same over shared memory: the transport beneath, the same events.
        TracedRun{"lesson05_shm", LESSON_05, "--backend auto --mb 0.2 --iters 1 --no-steps", 3, 50},
        TracedRun{"lesson06", LESSON_06, "--backend threads --ranks 4 --steps 2", 0, 8},
        TracedRun{"lesson07", LESSON_07, "--backend threads --ranks 2 --accumulate 3 --steps 2 --rows 4", 0, 8},
        TracedRun{"lesson08", LESSON_08, "--backend threads --ranks 2 --width 512 --layers 4 --rows 16 --steps 1", 0,
                  8},
        TracedRun{"lesson09", LESSON_09,
                  "--backend threads --ranks 2 --steps 4 --steps-per-epoch 2 --save-every 2 --checkpoint-dir {dir}/ckpt",
                  0, 8},
        TracedRun{"lesson10", LESSON_10, "--backend threads --ranks 2 --steps 1", 0, 20},
        TracedRun{"lesson11", LESSON_11, "--backend threads " + kCapstone, 0, 100},
        TracedRun{"lesson11_gloo", LESSON_11, "--backend gloo " + kCapstone, 4, 100},
        TracedRun{"lesson12", LESSON_12, "--backend threads --ranks 4 --width 256 --layers 3 --rows 4 --steps 1", 0,
                  100},
        TracedRun{"lesson13", LESSON_13,
                  "--backend threads --ranks 2 --seq 8 --batch 2 --hidden 32 --heads 4 --ffn 64", 0, 8},
        TracedRun{"lesson14", LESSON_14, "--backend threads --ranks 2 --bug none --steps 2 --flight-dir {dir}/flight", 0,
                  8}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Benchmarks, PerfettoTraces,
    ::testing::Values(
        TracedRun{"collective", DISTLAB_BENCH,
                  "collective --backend threads --ranks 4 -b 4K -e 64K -f 4 -n 1 -w 0 --algorithm all", 0, 20},
        TracedRun{"p2p", DISTLAB_BENCH, "p2p --backend threads --ranks 2 -b 4K -e 64K -f 4 -n 1 -w 0", 0, 4},
        TracedRun{"tensor", DISTLAB_BENCH, "tensor --backend threads --ranks 2 --preset tiny -n 1 -w 0", 0, 8},
        TracedRun{"ddp", DISTLAB_BENCH,
                  "ddp --backend threads --ranks 2 --width 256 --layers 3 --rows 4 -n 1 -w 0 --rounds 1", 0, 8},
        TracedRun{"capstone", DISTLAB_BENCH, "capstone --backend threads --ranks 4 --layouts 2x2 --preset tiny -n 1 -w 0",
                  0, 20},
        TracedRun{"zero", DISTLAB_BENCH, "zero --backend gloo --quick", 2, 20}),
    [](const auto& info) { return info.param.name; });

}  // namespace
