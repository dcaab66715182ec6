// The flight recorder on thread ranks: each injected fault (faults.hpp) ends
// within the timeout, and the diagnosis names the rank, the operation, the
// sequence number and the cause (fault_checks.hpp); the ring keeps the last
// N; damaged files are refused with a line; SIGUSR1 writes the files. The
// launcher's exit records are in exits_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>

#include "collectives/collectives.hpp"
#include "comm/threads_backend.hpp"
#include "fault_checks.hpp"
#include "faults.hpp"
#include "flight/recorder.hpp"
#include "flight/why.hpp"
#include "launcher_process.hpp"
#include "run_why.hpp"

namespace {

using namespace std::chrono_literals;
using distlab::comm::CommOptions;
using distlab::comm::Communicator;
using distlab::launcher::testing::fresh_dir;
using distlab::launcher::testing::read_file;
namespace flight = distlab::flight;
using namespace distlab::flight_test;

struct Outcome {
  std::string dir;
  std::string error;  // what run_thread_ranks threw
  double seconds = 0;
  flight::Diagnosis diagnosis;
};

// Four thread ranks, a 500 ms timeout, `fault` done by `culprit`.
Outcome inject(const std::string& fault, int culprit, size_t entries = flight::kDefaultEntries) {
  Outcome o;
  o.dir = fresh_dir("flight_" + fault);
  CommOptions options;
  options.timeout = 500ms;
  options.flight = flight::Recorder::create({entries, o.dir});
  const auto start = std::chrono::steady_clock::now();
  try {
    distlab::comm::run_thread_ranks(
        4, [&](Communicator& comm) { distlab::flight_test::run_fault(comm, fault, culprit); }, options);
  } catch (const distlab::comm::CommError& e) {
    o.error = e.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.diagnosis = flight::diagnose_files({o.dir});
  return o;
}

std::string text_of(const Outcome& o) { return flight::to_text(o.diagnosis) + "\nerror: " + o.error; }

// The fault made the job fail, within its timeout rather than hanging.
void expect_ended(const Outcome& o) {
  EXPECT_FALSE(o.error.empty()) << "the fault must make the job fail";
  EXPECT_LT(o.seconds, 5.0) << "the job must end within its timeout, not hang";
}

TEST(FlightThreads, SkippedCollectiveNamesTheRankThatNeverEnteredIt) {
  const Outcome o = inject("skip", 2);
  expect_ended(o);
  expect_skip(o.diagnosis, 2, "ranks 0, 1, 3");
  EXPECT_TRUE(contains(o.diagnosis.findings.front().text, "then it returned from its work")) << text_of(o);
  std::printf("%s", flight::to_text(o.diagnosis).c_str());
}

TEST(FlightThreads, CollectivesInAnotherOrderAreAMismatchAtTheirNumber) {
  const Outcome o = inject("order", 3);
  expect_ended(o);
  expect_order(o.diagnosis, 3, "ranks 0-2");
  std::printf("%s", flight::to_text(o.diagnosis).c_str());
}

TEST(FlightThreads, AnotherShapeIsNamedWithBothShapes) {
  const Outcome o = inject("shape", 3);
  expect_ended(o);
  expect_shape(o.diagnosis, 3, "ranks 0-2");
  std::printf("%s", flight::to_text(o.diagnosis).c_str());
}

TEST(FlightThreads, ARankThatStopsIsTheCauseOfTheOthersWait) {
  const Outcome o = inject("dead", 1);
  expect_ended(o);
  expect_dead(o.diagnosis, 1, {0, 2, 3});
  EXPECT_TRUE(contains(o.diagnosis.findings.front().text,
                       "rank 1 left the job (failed: injected: rank 1 stops) after all_reduce #3 of group world"))
      << text_of(o);
  EXPECT_EQ(o.diagnosis.exits, "") << "no launcher, no exit records";
  std::printf("%s", flight::to_text(o.diagnosis).c_str());
}

TEST(FlightThreads, ARecvWhoseMessageNeverComesNamesTheSilentPeer) {
  const Outcome o = inject("p2p", 3);
  expect_ended(o);
  expect_p2p(o.diagnosis, 3, 4);
  std::printf("%s", flight::to_text(o.diagnosis).c_str());
}

TEST(FlightThreads, EveryRankNumbersTheSameCollectivesAlike) {
  const Outcome o = inject("skip", 2);
  for (int r = 0; r < 4; ++r) {
    const flight::Dump dump = flight::read_dump(flight::dump_path(o.dir, r));
    EXPECT_EQ(dump.rank, r);
    ASSERT_GE(dump.entries.size(), 4u);
    for (uint64_t k = 0; k < 4; ++k) {
      EXPECT_EQ(dump.entries[k].seq, k);
      EXPECT_EQ(dump.entries[k].op, k == 0 ? "broadcast" : "all_reduce");
      EXPECT_EQ(dump.entries[k].state, flight::State::kCompleted);
    }
  }
}

// The built tool prints what the library says.
TEST(FlightThreads, DistlabTraceWhyPrintsTheDiagnosis) {
  const Outcome o = inject("shape", 3);
  const auto [out, exit_code] = run_why(o.dir);
  EXPECT_EQ(exit_code, 0) << out;
  EXPECT_EQ(out, flight::to_text(o.diagnosis));
  EXPECT_TRUE(contains(out, "read 4 flight file(s): ranks 0-3 of 4")) << out;
  EXPECT_TRUE(contains(out, "collective mismatch at #4 of group world")) << out;
}

TEST(FlightRing, KeepsTheLastNInOrder) {
  flight::Ring ring(/*rank=*/0, /*world_size=*/1, /*capacity=*/5);
  for (int k = 0; k < 12; ++k) {
    flight::Entry e;
    e.kind = "collective";
    e.op = "all_reduce";
    e.seq = static_cast<uint64_t>(k);
    const uint64_t id = ring.enter(e);
    if (k != 11) ring.end(id, flight::State::kCompleted);
  }
  ring.end(3, flight::State::kFailed);  // long gone: ignored
  const flight::Dump dump = ring.snapshot();
  EXPECT_EQ(dump.recorded, 12u);
  ASSERT_EQ(dump.entries.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(dump.entries[i].id, 7 + i);
    EXPECT_EQ(dump.entries[i].seq, 7 + i);
  }
  EXPECT_EQ(dump.entries.back().state, flight::State::kEntered);
}

// 20 collectives into rings of 8: each rank keeps #12-#19 (plus the fault's
// #20, here every rank's), numbered alike after wrapping.
TEST(FlightRing, SequenceNumbersStayRightAfterWrapping) {
  const std::string dir = fresh_dir("flight_wrap");
  CommOptions options;
  options.flight = flight::Recorder::create({/*entries=*/8, dir});
  distlab::comm::run_thread_ranks(
      3,
      [&](Communicator& comm) {
        auto t = torch::ones({64});
        for (int k = 0; k < 20; ++k) distlab::collectives::all_reduce(comm, t);
      },
      options);
  options.flight->dump("test");
  for (int r = 0; r < 3; ++r) {
    const flight::Dump dump = flight::read_dump(flight::dump_path(dir, r));
    EXPECT_EQ(dump.recorded, 20u);
    ASSERT_EQ(dump.entries.size(), 8u);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(dump.entries[i].seq, 12 + i) << "rank " << r;
    EXPECT_EQ(dump.exit, "returned");
  }
  const auto d = flight::diagnose_files({dir});
  EXPECT_EQ(d.findings.front().cause, "none") << flight::to_text(d);
}

// A rank's file may be written several times (on SIGUSR1, then on SIGTERM
// when its launcher stops it): each writing must date the same entries
// alike, or a diagnosis read between two writings ("completed at
// 18:02:11.346") differs from one read after them. Every dump of a process
// turns its clock into dates with one offset, and that offset is the wall
// clock's.
TEST(FlightFiles, EveryDumpOfAProcessDatesItsEntriesAlike) {
  const std::string dir = fresh_dir("flight_dates");
  CommOptions options;
  options.flight = flight::Recorder::create({/*entries=*/8, dir});
  distlab::comm::run_thread_ranks(
      2,
      [&](Communicator& comm) {
        auto t = torch::ones({8});
        distlab::collectives::all_reduce(comm, t);
      },
      options);
  std::set<int64_t> offsets;
  for (int k = 0; k < 200; ++k) {
    options.flight->dump("written again");
    const flight::Dump dump = flight::read_dump(flight::dump_path(dir, k % 2));
    offsets.insert(dump.dumped_unix_us - dump.dumped_us);
  }
  EXPECT_EQ(offsets.size(), 1u) << "the offset moved between dumps: " << *offsets.begin() << " to "
                                << *offsets.rbegin() << " us";
  const flight::Dump dump = flight::read_dump(flight::dump_path(dir, 0));
  const int64_t now_unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  EXPECT_LT(std::abs(now_unix_us - dump.dumped_unix_us), 60 * 1000000LL) << "a date more than a minute away from now";
}

TEST(FlightFiles, DamagedFilesAreRefusedWithOneLineEach) {
  const Outcome o = inject("skip", 2);
  const std::string good = read_file(flight::dump_path(o.dir, 0));
  const std::string dir = fresh_dir("flight_damaged");
  std::ofstream(dir + "/flight.rank0.json") << good.substr(0, good.size() / 2);  // truncated
  std::string newer = good;
  newer.replace(newer.find("\"version\": 1"), 12, "\"version\": 7");
  std::ofstream(dir + "/flight.rank1.json") << newer;
  std::ofstream(dir + "/flight.rank2.json") << "{\"format\": \"distlab-flight\", \"version\": 1, \"rank\": \"two\"}";
  std::ofstream(dir + "/flight.rank3.json") << "\x01\x02 not json";
  const auto d = flight::diagnose_files({dir, dir + "/flight.rank9.json"});
  const std::string text = flight::to_text(d);
  ASSERT_EQ(d.refused.size(), 5u) << text;
  EXPECT_TRUE(contains(d.refused[0], dir + "/flight.rank0.json: damaged (not complete JSON")) << text;
  EXPECT_TRUE(contains(d.refused[1], "flight.rank1.json: flight recorder version 7, this tool reads version 1")) << text;
  EXPECT_TRUE(contains(d.refused[2], "flight.rank2.json: damaged (")) << text;
  EXPECT_TRUE(contains(d.refused[3], "flight.rank3.json: damaged (not complete JSON")) << text;
  EXPECT_TRUE(contains(d.refused[4], "flight.rank9.json: cannot be read (missing?)")) << text;
  for (const auto& line : d.refused) EXPECT_EQ(line.find('\n'), std::string::npos) << line;

  const auto [out, exit_code] = run_why(dir);
  EXPECT_EQ(exit_code, 1) << out;  // nothing readable
  EXPECT_TRUE(contains(out, "refused " + dir + "/flight.rank1.json: flight recorder version 7")) << out;
}

TEST(FlightFiles, SigusrOneWritesEveryRanksFile) {
  const std::string dir = fresh_dir("flight_sigusr1");
  auto recorder = flight::Recorder::create({flight::kDefaultEntries, dir});
  for (int r = 0; r < 2; ++r) recorder->ring_of(r, 2)->add_group("world", {0, 1});
  flight::dump_on_signals();
  kill(getpid(), SIGUSR1);
  for (int r = 0; r < 2; ++r) {
    const std::string path = flight::dump_path(dir, r);
    ASSERT_TRUE(distlab::launcher::testing::wait_for_file(path, 5s)) << path;
    // The file appears by rename: whole, or not at all.
    EXPECT_EQ(flight::read_dump(path).reason, "SIGUSR1");
  }
}

}  // namespace
