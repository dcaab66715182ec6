// --list-parts and --step in every lesson program, run as a user runs them.
//
// Every lesson lists its parts (the titles below are what the slides are
// checked against); with --step and no terminal it prints each title before
// its part, in that order, without waiting, and each part's numbered
// heading starts with its title. On a terminal, rank 0 stops before each
// part until Enter, and the other ranks wait for it with the communicator's
// timeout off: on thread ranks, and as gloo processes under distlab-run
// (which forwards its terminal to rank 0) with a timeout shorter than the
// pause; lesson 14's last part, which runs after its job has failed, waits
// for Enter too.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/tags.hpp"
#include "comm/threads_backend.hpp"
#include "common/lesson.hpp"
#include "run_program.hpp"
#include "terminal_process.hpp"
#include "trace_files.hpp"
#include "trace/reader.hpp"

namespace {

using namespace std::chrono_literals;
using distlab::launcher::testing::TerminalProcess;

using distlab::lessons::testing::expect_nested;
using distlab::lessons::testing::fresh_trace_folder;
using distlab::lessons::testing::lines_of;
using distlab::lessons::testing::traces_in;
using distlab::lessons::testing::Outcome;

// `command` with stdin from /dev/null: no terminal, as under CI.
Outcome run(const std::string& command) { return distlab::lessons::testing::run(command, "< /dev/null"); }

struct Lesson {
  std::string program;
  int first_number;                 // lessons 06-07 start with "0. The reference"
  std::vector<std::string> titles;  // in order
  std::string quick_flags;          // a short run
  bool headings;                    // prints "N. Title ..." headings (09 and 11 print log lines only)
  size_t min_events = 4;            // in its --trace files: a run that traced nothing would prove nothing
  bool traced = true;               // takes --trace (lesson 18 records its plan with --record instead)
};

std::vector<Lesson> lessons() {
  const std::string checkpoints = testing::TempDir() + "distlab_step_test_checkpoints";
  std::filesystem::remove_all(checkpoints);
  const std::string flight = testing::TempDir() + "distlab_step_test_flight";
  return {
      {LESSON_01, 1,
       {"A step after every item", "Accumulate the same two items",
        "The accumulated gradient IS the gradient of the whole batch", "Training both ways",
        "The batch split across the ranks"},
       "--backend threads --ranks 2 --epochs 1", true},
      {LESSON_02, 1, {"One after another", "All at once", "The wire"},
       "--backend threads --ranks 2 --file-mb 0.01 --iters 1", true},
      {LESSON_03, 1, {"The story", "The tree by hand", "The library's broadcasts", "Initial weights from the root"},
       "--backend threads --ranks 2 --mb 0.01 --iters 1", true},
      {LESSON_04, 1, {"The story", "The library's reduces"}, "--backend threads --ranks 2 --mb 0.01 --iters 1", true},
      {LESSON_05, 1, {"The story", "The library's all-reduces"}, "--backend threads --ranks 2 --mb 0.01 --iters 1",
       true},
      {LESSON_06, 0,
       {"The reference", "From scratch", "The naive version from the library", "ddp::DistributedDataParallel",
        "The check"},
       "--backend threads --ranks 2 --steps 1", true},
      {LESSON_07, 0, {"The reference", "Without and with no_sync", "The check"},
       "--backend threads --ranks 2 --accumulate 2 --steps 1 --rows 2", true},
      {LESSON_08, 1, {"The bucket plan", "One step from the trace", "Overlap", "Bucket sizes"},
       "--backend threads --ranks 2 --width 64 --layers 2 --rows 4 --steps 1", true},
      {LESSON_09, 1,
       {"Where each rank sits", "Resume from the newest checkpoint", "Train and save checkpoints",
        "The final parameters"},
       "--backend threads --ranks 2 --steps 2 --save-every 1 --checkpoint-dir " + checkpoints, false},
      {LESSON_10, 1,
       {"The tutorial's GPT", "The schedules as data", "Each schedule run for real", "The tutorial's batch_first=False trap"},
       "--backend threads --ranks 2 --steps 1 --schedules gpipe --dim 16 --layers 2 --heads 2 --ffn 32 --vocab 50 "
       "--seq 8 --batch 4 --microbatches 2",
       true},
      {LESSON_11, 1, {"The layout and the data", "Training", "Against the unigram baseline"},
       "--backend threads --preset tiny --epochs 1 --batches-per-epoch 1 --eval-batches 1", false},
      {LESSON_12, 1,
       {"The accounting", "Memory per rank", "Bytes per step", "Step time", "The same parameters",
        "ZeRO-3 in the trace"},
       "--backend threads --ranks 2 --width 32 --layers 2 --rows 2 --steps 1", true},
      {LESSON_13, 1, {"The two linears by hand", "A tensor-parallel Transformer layer", "Sequence parallelism"},
       "--backend threads --ranks 2 --seq 8 --batch 2 --hidden 16 --heads 2 --ffn 32", true},
      {LESSON_14, 1, {"The job", "Training", "The diagnosis"},
       "--backend threads --ranks 2 --steps 2 --flight-dir " + flight, true},
      {LESSON_15, 1,
       {"Two blocks merged by hand", "The ring", "Contiguous against zigzag", "Ulysses against the ring and all-gather"},
       "--backend threads --ranks 2 --seq 16 --batch 1 --heads 2 --head-dim 4", true},
      {LESSON_16, 1,
       {"Routing by hand", "The balancing loss at work", "Expert parallelism", "Bytes per step"},
       "--backend threads --ranks 2 --tokens 16 --steps 5", true},
      {LESSON_17, 1, {"The anatomy", "Recomputation", "Mixed precision", "MFU"},
       "--backend threads --ranks 1 --layers 1 --seq 8 --batch 2 --hidden 16 --heads 2 --ffn 32 --repeats 1", true,
       0},  // its trace holds memory counters, no slices
      {LESSON_18, 1, {"The question", "This machine", "The prediction", "Measured", "The largest gap", "Memory"},
       "--preset tiny --ranks 2 --profile " DISTLAB_SOURCE_DIR "/planner/profiles/vm-2026-12-01.json --measure 0 "
       "--warmup 1 --steps 1",
       true, 0, false},
  };
}

std::string numbered(const Lesson& lesson, size_t i) {
  return std::to_string(lesson.first_number + static_cast<int>(i)) + ". " + lesson.titles[i];
}

TEST(LessonParts, ListPartsPrintsTheTitlesAndStartsNoJob) {
  for (const Lesson& lesson : lessons()) {
    const Outcome r = run(lesson.program + " --list-parts");
    ASSERT_EQ(r.status, 0) << lesson.program << "\n" << r.output;
    std::string expected;
    for (size_t i = 0; i < lesson.titles.size(); ++i) expected += numbered(lesson, i) + "\n";
    EXPECT_EQ(r.output, expected) << lesson.program;
  }
}

// A part begun out of order is a bug in the lesson: the error names the
// part begun and the one declared next, on every rank.
TEST(LessonParts, APartOutOfOrderNamesBothParts) {
  distlab::lessons::Parts parts({"The story", "The tree by hand"});
  EXPECT_EQ(parts.list(), "1. The story\n2. The tree by hand\n");
  distlab::comm::run_thread_ranks(2, [&](distlab::comm::Communicator& comm) {
    try {
      parts.begin(comm, "The tree by hand");
      ADD_FAILURE() << "rank " << comm.rank() << ": no error";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("part \"The tree by hand\" begins, but the next part declared is "
                                           "\"1. The story\""),
                std::string::npos)
          << e.what();
    }
    parts.begin(comm, "The story");
    parts.begin(comm, "The tree by hand");
    EXPECT_THROW(parts.begin(comm, "The story"), std::logic_error);  // none left
  });
}

// Without a terminal --step does not wait: the titles come out in order,
// each before its part's heading, the same as --list-parts prints them. The
// run writes a trace too, which must open right in Perfetto: this is where
// every lesson's trace on thread ranks is checked (perfetto_test.cpp holds
// the processes' files).
TEST(LessonParts, StepWithoutATerminalPrintsEveryTitleInOrderAndGoesOn) {
  static const std::regex step_line(R"(^--step: (.*) \(part (\d+) of (\d+)\)$)");
  for (const Lesson& lesson : lessons()) {
    const std::string dir = fresh_trace_folder(std::filesystem::path(lesson.program).filename().string());
    const std::string command =
        lesson.program + " --step " + lesson.quick_flags + (lesson.traced ? " --trace " + dir + "/trace.json" : "");
    const auto start = std::chrono::steady_clock::now();
    const Outcome r = run(command);
    ASSERT_EQ(r.status, 0) << command << "\n" << r.output;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 60s) << command;
    EXPECT_NE(r.output.find("--step: stdin is not a terminal, so the parts follow without waiting"),
              std::string::npos)
        << command << "\n" << r.output;
    EXPECT_EQ(r.output.find("Press Enter"), std::string::npos) << command << "\n" << r.output;

    std::vector<std::string> stepped;
    std::vector<size_t> line_of_step;
    const auto lines = lines_of(r.output);
    for (size_t l = 0; l < lines.size(); ++l) {
      std::smatch m;
      if (!std::regex_match(lines[l], m, step_line)) continue;
      EXPECT_EQ(std::stoul(m[2]), stepped.size() + 1) << lines[l];
      EXPECT_EQ(std::stoul(m[3]), lesson.titles.size()) << lines[l];
      stepped.push_back(m[1]);
      line_of_step.push_back(l);
    }
    std::vector<std::string> listed;  // what --list-parts prints (ListPartsPrintsTheTitlesAndStartsNoJob)
    for (size_t i = 0; i < lesson.titles.size(); ++i) listed.push_back(numbered(lesson, i));
    EXPECT_EQ(stepped, listed) << command << "\n" << r.output;
    // The run's trace opens right in Perfetto (trace_files.hpp).
    size_t events = 0;
    for (const std::string& file : traces_in(dir)) events += expect_nested(file);
    EXPECT_GE(events, lesson.min_events) << command;
    if (!lesson.headings || stepped.size() != lesson.titles.size()) continue;
    // Part i's heading starts with "N. Title" and comes after its --step
    // line, before the next one.
    for (size_t i = 0; i < lesson.titles.size(); ++i) {
      const size_t end = i + 1 < line_of_step.size() ? line_of_step[i + 1] : lines.size();
      bool found = false;
      for (size_t l = line_of_step[i] + 1; l < end && !found; ++l)
        found = lines[l].find_first_not_of(' ') != std::string::npos &&
                lines[l].compare(lines[l].find_first_not_of(' '), numbered(lesson, i).size(), numbered(lesson, i)) == 0;
      EXPECT_TRUE(found) << command << ": no heading starting with \"" << numbered(lesson, i) << "\" in its part\n"
                         << r.output;
    }
  }
}

// "--step: N. Title (part i of n). Press Enter"
std::string prompt(const std::string& numbered_title, int part, int parts) {
  return "--step: " + numbered_title + " (part " + std::to_string(part) + " of " + std::to_string(parts) +
         "). Press Enter";
}

TEST(LessonStep, OnATerminalRankZeroWaitsForEnterBeforeEachPart) {
  TerminalProcess lesson({LESSON_03, "--backend", "threads", "--ranks", "4", "--step", "--mb", "0.01", "--iters", "1"});
  ASSERT_TRUE(lesson.wait_for(prompt("1. The story", 1, 4), 60s)) << lesson.output();
  lesson.read_for(1500ms);
  EXPECT_TRUE(lesson.running()) << lesson.output();
  EXPECT_EQ(lesson.output().find("\n1. The story:"), std::string::npos) << "part 1 ran before Enter\n"
                                                                     << lesson.output();
  lesson.type("\n");
  ASSERT_TRUE(lesson.wait_for(prompt("2. The tree by hand", 2, 4), 60s)) << lesson.output();
  EXPECT_NE(lesson.output().find("\n1. The story:"), std::string::npos) << lesson.output();
  lesson.read_for(500ms);
  EXPECT_EQ(lesson.output().find("\n2. The tree by hand (tree"), std::string::npos) << lesson.output();
  lesson.type("\n");
  ASSERT_TRUE(lesson.wait_for(prompt("3. The library's broadcasts", 3, 4), 60s)) << lesson.output();
  // Ctrl-D: no more waiting for the rest of the run.
  lesson.type("\x04");
  EXPECT_EQ(lesson.wait_exit(60s), 0) << lesson.output();
  EXPECT_NE(lesson.output().find("--step: end of input: the remaining parts follow without waiting"),
            std::string::npos)
      << lesson.output();
  EXPECT_NE(lesson.output().find("--step: 4. Initial weights from the root (part 4 of 4)\n"), std::string::npos)
      << lesson.output();
  EXPECT_NE(lesson.output().find("\n4. Initial weights from the root (linear"), std::string::npos) << lesson.output();
}

// Lesson 14's last part runs after its job has failed, on the program's own
// thread: rank 0's terminal holds it too, until Enter.
TEST(LessonStep, APartAfterTheJobWaitsForEnterToo) {
  const std::string dir = testing::TempDir() + "distlab_step_test_flight_tty";
  TerminalProcess lesson({LESSON_14, "--backend", "threads", "--ranks", "2", "--step", "--bug", "dead", "--culprit",
                          "1", "--at-step", "1", "--steps", "1", "--flight-dir", dir});
  for (const auto& [title, part] : {std::pair<std::string, int>{"1. The job", 1}, {"2. Training", 2}}) {
    ASSERT_TRUE(lesson.wait_for(prompt(title, part, 3), 60s)) << lesson.output();
    lesson.type("\n");
  }
  ASSERT_TRUE(lesson.wait_for(prompt("3. The diagnosis", 3, 3), 60s)) << lesson.output();
  EXPECT_NE(lesson.output().find("rank 1: --bug dead: dies at step 1"), std::string::npos) << lesson.output();
  lesson.read_for(1500ms);
  EXPECT_TRUE(lesson.running()) << lesson.output();
  EXPECT_EQ(lesson.output().find("\n3. The diagnosis:"), std::string::npos) << "part 3 ran before Enter\n"
                                                                           << lesson.output();
  lesson.type("\n");
  EXPECT_EQ(lesson.wait_exit(60s), 1) << lesson.output();  // a bug was injected and found
  EXPECT_NE(lesson.output().find("\n3. The diagnosis:"), std::string::npos) << lesson.output();
  EXPECT_NE(lesson.output().find("Run it yourself: build/launcher/distlab-trace why " + dir), std::string::npos)
      << lesson.output();
}

// Two gloo processes, a communicator timeout of 500 ms, and 1.5 s before
// each Enter: rank 1 waits for rank 0 without timing out, as its trace shows.
TEST(LessonStep, UnderTheLauncherTheOtherRanksOutwaitTheirTimeout) {
  const std::string dir = testing::TempDir() + "distlab_step_test_gloo";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  TerminalProcess job({DISTLAB_RUN, "--nproc-per-node", "2", "--master-port", "0", "--no-prefix", "--", LESSON_03,
                       "--backend", "gloo", "--step", "--timeout-ms", "500", "--mb", "0.01", "--iters", "1", "--trace",
                       dir + "/t.json"});
  for (int part = 1; part <= 2; ++part) {
    const std::string title = part == 1 ? "1. The story" : "2. The tree by hand";
    ASSERT_TRUE(job.wait_for(prompt(title, part, 4), 60s)) << job.output();
    job.read_for(1500ms);
    ASSERT_TRUE(job.running()) << job.output();
    EXPECT_EQ(job.output().find("\n" + title + (part == 1 ? ":" : " (tree")), std::string::npos) << job.output();
    job.type("\n");
  }
  ASSERT_TRUE(job.wait_for(prompt("3. The library's broadcasts", 3, 4), 60s)) << job.output();
  job.type("\x04");
  EXPECT_EQ(job.wait_exit(60s), 0) << job.output();
  EXPECT_EQ(job.output().find("did not complete"), std::string::npos) << job.output();
  EXPECT_NE(job.output().find("\n4. Initial weights from the root (linear"), std::string::npos) << job.output();

  // Rank 1's waits for rank 0's "go": the first two outlasted 500 ms.
  const auto events = distlab::trace::read_chrome_trace(dir + "/t.rank1.json");
  std::vector<int64_t> waits_us;
  for (const auto& e : events)
    if (e.category == "recv" && e.peer == 0 && e.arg("tag") == std::to_string(distlab::collectives::kLessonStepTag))
      waits_us.push_back(e.end_us - e.begin_us);
  ASSERT_EQ(waits_us.size(), 4u) << job.output();
  EXPECT_GT(waits_us[0], 1'400'000);
  EXPECT_GT(waits_us[1], 1'400'000);
}

}  // namespace
