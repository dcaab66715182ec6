// Every trace a lesson (with step_test.cpp's runs), the capstone and the
// benchmarks write opens right in Perfetto: on each thread track the
// complete events nest or stay apart (Perfetto draws partly overlapping ones
// wrong), and each send->recv arrow lands on its own send and recv.
// Processes under distlab-run write one file each; those are checked one by
// one and merged by distlab-trace, whose output is checked too. The check
// reads the files' JSON itself (tests/support/perfetto_tracks.hpp).
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "run_program.hpp"
#include "support/small_corpus.hpp"
#include "trace_files.hpp"

namespace {

using distlab::lessons::testing::Outcome;
using distlab::lessons::testing::expect_nested;
using distlab::lessons::testing::fresh_trace_folder;
using distlab::lessons::testing::run;
using distlab::lessons::testing::traces_in;

struct TracedRun {
  std::string name;
  std::string program;    // the built program
  std::string flags;      // without --trace; {dir} is the run's own folder, {corpus} the small corpus
  int processes = 0;      // > 0: under distlab-run, one file per process
  size_t min_events = 1;  // a run that traced nothing would prove nothing
};

void PrintTo(const TracedRun& t, std::ostream* os) { *os << t.name; }

class PerfettoTraces : public ::testing::TestWithParam<TracedRun> {};

TEST_P(PerfettoTraces, EveryTrackNestsAndEveryArrowLandsOnItsSlice) {
  const TracedRun& t = GetParam();
  const std::string dir = fresh_trace_folder(t.name);
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

// Every lesson's trace on thread ranks is checked where its --step run
// writes it (step_test.cpp); here the runs that stress the nesting most and
// the processes' files.
INSTANTIATE_TEST_SUITE_P(
    Lessons, PerfettoTraces,
    ::testing::Values(
        // Four threads, 1 MB: a ring step's send starts inside its recv.
        TracedRun{"lesson05", LESSON_05, "--backend threads --ranks 4 --mb 1 --iters 1 --no-steps", 0, 100},
        TracedRun{"lesson05_gloo", LESSON_05, "--backend gloo --mb 0.2 --iters 1 --no-steps", 3, 50},
        // The same over shared memory: the transport beneath, the same events.
        TracedRun{"lesson05_shm", LESSON_05, "--backend auto --mb 0.2 --iters 1 --no-steps", 3, 50},
        TracedRun{"lesson11_gloo", LESSON_11, "--backend gloo " + kCapstone, 4, 100}),
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
