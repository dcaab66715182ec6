// FlightModel against dumps whose times the test sets (flight_dumps.hpp):
// the diagnosis is flight::diagnose's own, and the marker lies at the
// times injected (the waiting ranks' entry into the finding's operation,
// the culprit's operation), for each kind of finding; clock offsets move a
// rank's times but not the text; files and directories are read, and
// refused, as distlab-trace why reads them. And where the flight rows go
// among the trace's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "flight/why.hpp"
#include "flight_dumps.hpp"
#include "flight_model.hpp"
#include "flight_overlay.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;
using flight::State;

std::vector<FlightOpRef> sorted(std::vector<FlightOpRef> refs) {
  std::sort(refs.begin(), refs.end(),
            [](const FlightOpRef& a, const FlightOpRef& b) { return a.rank != b.rank ? a.rank < b.rank : a.entry < b.entry; });
  return refs;
}

TEST(FlightModel, SkipIsMarkedWhereTheWaitingRanksEnteredTheOperation) {
  const std::vector<flight::Dump> dumps = skip_job();
  FlightModel m;
  m.set_dumps(dumps);
  EXPECT_EQ(flight::to_text(m.diagnosis()), flight::to_text(flight::diagnose(dumps)));
  ASSERT_TRUE(m.has_marker());
  const flight::Finding& f = *m.marked_finding();
  EXPECT_EQ(f.cause, "skip");
  EXPECT_EQ(f.culprits, std::vector<int>{2});

  const FlightMarker& mk = m.marker();
  EXPECT_EQ(sorted(mk.waiting_ops), (std::vector<FlightOpRef>{{0, 4}, {1, 4}, {3, 4}}));
  EXPECT_EQ(mk.culprit_ops, (std::vector<FlightOpRef>{{2, 3}}));  // rank 2's last: #3
  EXPECT_EQ(mk.at_us, kEnter4[0]);                                // the earliest of 0, 1 and 3
  ASSERT_TRUE(mk.has_culprit_time);
  EXPECT_EQ(mk.culprit_us, kRank2Ended3);  // it completed #3: from its end
  EXPECT_EQ(mk.band_begin_us, kRank2Ended3);
  EXPECT_EQ(mk.band_end_us, kEnter4[0]);

  EXPECT_EQ(m.ranks(), (std::vector<int>{0, 1, 2, 3}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(m.is_culprit(r), r == 2) << r;
  EXPECT_TRUE(m.is_marked({1, 4}));
  EXPECT_FALSE(m.is_marked({1, 3}));
  EXPECT_EQ(m.span_end_us({0, 4}), kDumped);          // still waiting at the dump
  EXPECT_EQ(m.span_end_us({0, 2}), kT0 + 28'000);     // #2 completed
  EXPECT_EQ(m.begin_us(), kT0);
  EXPECT_EQ(m.end_us(), kDumped);

  // The window around it shows #1-#3 whole and the parting point, not
  // #0's entry.
  const auto focus = m.focus_range();
  ASSERT_TRUE(focus.has_value());
  EXPECT_LE(focus->first, kT0 + 10'000);
  EXPECT_GT(focus->first, kT0);
  EXPECT_GT(focus->second, kEnter4[1]);
  EXPECT_LT(focus->second, kDumped);
}

TEST(FlightModel, AnOrderMismatchMarksTheCulpritsOwnCallFromItsEntry) {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 4; ++r) {
    std::vector<flight::Entry> entries = agreed_four();
    // Rank 3 calls broadcast at #4 at 1'051'000; its wait fails at 1'550'000.
    entries.push_back(r == 3 ? collective(4, 4, "broadcast", 1'051'000, State::kFailed, 1'550'000, {16})
                             : collective(4, 4, "all_reduce", kEnter4[r == 2 ? 1 : r], State::kStarted, 0));
    dumps.push_back(make_dump(r, 4, entries));
  }
  FlightModel m;
  m.set_dumps(dumps);
  EXPECT_EQ(flight::to_text(m.diagnosis()), flight::to_text(flight::diagnose(dumps)));
  ASSERT_TRUE(m.has_marker());
  EXPECT_EQ(m.marked_finding()->cause, "order");
  const FlightMarker& mk = m.marker();
  EXPECT_EQ(sorted(mk.waiting_ops), (std::vector<FlightOpRef>{{0, 4}, {1, 4}, {2, 4}}));
  EXPECT_EQ(mk.culprit_ops, (std::vector<FlightOpRef>{{3, 4}}));
  EXPECT_EQ(mk.at_us, kEnter4[0]);
  EXPECT_EQ(mk.culprit_us, 1'051'000);  // its entry, not the failure 0.5 s later
  EXPECT_EQ(mk.band_begin_us, kEnter4[0]);
  EXPECT_EQ(mk.band_end_us, 1'051'000);
}

TEST(FlightModel, ARankThatLeftNoFileIsTheCulpritAndStillHasARow) {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 2; ++r) {
    std::vector<flight::Entry> entries = agreed_four();
    entries.push_back(collective(4, 4, "all_reduce", kEnter4[r], State::kStarted, 0));
    dumps.push_back(make_dump(r, 3, entries));
  }
  FlightModel m;
  m.set_dumps(dumps);
  EXPECT_EQ(flight::to_text(m.diagnosis()), flight::to_text(flight::diagnose(dumps)));
  ASSERT_TRUE(m.has_marker());
  EXPECT_EQ(m.marked_finding()->cause, "dead");
  EXPECT_EQ(m.ranks(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(m.dump_of(2), nullptr);
  EXPECT_TRUE(m.is_culprit(2));
  EXPECT_EQ(m.marker().at_us, kEnter4[0]);
  EXPECT_TRUE(m.marker().culprit_ops.empty());
  EXPECT_FALSE(m.marker().has_culprit_time);
  EXPECT_EQ(m.marker().band_begin_us, kEnter4[0]);
  EXPECT_EQ(m.marker().band_end_us, kEnter4[0]);
}

TEST(FlightModel, AP2pFindingMarksTheRecvAndThePeersLastOperation) {
  std::vector<flight::Entry> rank0 = {collective(0, 0, "all_reduce", kT0, State::kCompleted, kT0 + 8'000)};
  flight::Entry recv;
  recv.id = 1;
  recv.kind = "p2p";
  recv.op = "recv";
  recv.seq = 0;
  recv.peer = 1;
  recv.tag = 7;
  recv.dtype = "float32";
  recv.shape = {64};
  recv.bytes = 256;
  recv.state = State::kStarted;
  recv.entered_us = kT0 + 20'000;
  recv.started_us = kT0 + 20'050;
  rank0.push_back(recv);
  std::vector<flight::Entry> rank1 = {collective(0, 0, "all_reduce", kT0 + 100, State::kCompleted, kT0 + 8'500)};
  const std::vector<flight::Dump> dumps = {make_dump(0, 2, rank0), make_dump(1, 2, rank1)};
  FlightModel m;
  m.set_dumps(dumps);
  EXPECT_EQ(flight::to_text(m.diagnosis()), flight::to_text(flight::diagnose(dumps)));
  ASSERT_TRUE(m.has_marker());
  EXPECT_EQ(m.marked_finding()->cause, "p2p");
  EXPECT_EQ(m.marker().waiting_ops, (std::vector<FlightOpRef>{{0, 1}}));
  EXPECT_EQ(m.marker().culprit_ops, (std::vector<FlightOpRef>{{1, 0}}));
  EXPECT_EQ(m.marker().at_us, kT0 + 20'000);
  EXPECT_EQ(m.marker().culprit_us, kT0 + 8'500);
  EXPECT_EQ(m.marker().band_begin_us, kT0 + 8'500);
  EXPECT_EQ(m.marker().band_end_us, kT0 + 20'000);
}

TEST(FlightModel, ClockOffsetsMoveARanksTimesButNotTheDiagnosis) {
  const std::vector<flight::Dump> dumps = skip_job();
  FlightModel m;
  m.set_dumps(dumps);
  const std::string before = flight::to_text(m.diagnosis());
  // Rank 1 on a machine whose clock is 600 us ahead: moved back as the
  // loader moves its events, its #4 becomes the earliest. Rank 2 moves 1 ms.
  m.set_clock_offsets({{1, trace::ClockOffset{-600, 5}}, {2, trace::ClockOffset{-1'000, 5}}});
  EXPECT_EQ(flight::to_text(m.diagnosis()), before);
  EXPECT_EQ(m.dump_of(1)->entries[4].entered_us, kEnter4[1] - 600);
  EXPECT_EQ(m.dump_of(1)->entries[4].started_us, kEnter4[1] + 20 - 600);
  EXPECT_EQ(m.dump_of(1)->entries[4].ended_us, 0);  // not yet: stays 0
  EXPECT_EQ(m.dump_of(1)->dumped_us, kDumped - 600);
  EXPECT_EQ(m.dump_of(0)->entries[4].entered_us, kEnter4[0]);
  EXPECT_EQ(m.marker().at_us, kEnter4[1] - 600);
  EXPECT_EQ(m.marker().culprit_us, kRank2Ended3 - 1'000);
}

TEST(FlightModel, NoWaitingRankNoMarker) {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 2; ++r) dumps.push_back(make_dump(r, 2, agreed_four(), "returned"));
  FlightModel m;
  m.set_dumps(dumps);
  ASSERT_EQ(m.diagnosis().findings.size(), 1u);
  EXPECT_EQ(m.diagnosis().findings.front().cause, "none");
  EXPECT_FALSE(m.has_marker());
  EXPECT_FALSE(m.focus_range().has_value());
  EXPECT_FALSE(m.is_culprit(0));
}

TEST(FlightModel, FilesAndDirectoriesAreReadAndRefusedAsWhyReadsThem) {
  const std::string dir = temp_path("flight_model_files");
  write_dumps(dir, skip_job());
  std::ofstream(dir + "/flight.rank3.json") << "{\"format\": \"distlab-flight\", \"vers";  // cut short
  const std::string empty = temp_path("flight_model_empty");
  mkdir(empty.c_str(), 0755);
  const std::vector<std::string> paths = {dir, empty, dir + "/flight.rank9.json"};
  FlightModel m;
  m.open(paths);
  const flight::Diagnosis want = flight::diagnose_files(paths);
  EXPECT_EQ(flight::to_text(m.diagnosis()), flight::to_text(want));
  EXPECT_EQ(m.diagnosis().refused, want.refused);
  EXPECT_EQ(want.refused.size(), 3u) << flight::to_text(want);
  EXPECT_NE(m.dump_of(0), nullptr);
  EXPECT_EQ(m.dump_of(3), nullptr);
  EXPECT_EQ(m.dump_of(0)->entries.size(), 5u);
  EXPECT_TRUE(m.loaded());
}

// Rank 0 has two trace rows, rank 2 two, rank 5 one; the flight files are
// of ranks 0-4. Each rank's flight row follows its trace rows; ranks 3 and
// 4 have flight rows only, rank 5 a trace row only.
TEST(FlightRows, EachRanksFlightRowFollowsItsTraceRows) {
  const std::vector<RowSlot> slots = interleave_rows({0, 0, 1, 2, 2, 5}, {0, 1, 2, 3, 4});
  std::vector<std::string> got;
  for (const RowSlot& s : slots) got.push_back((s.flight ? "F" : "T") + std::to_string(s.index));
  EXPECT_EQ(got, (std::vector<std::string>{"T0", "T1", "F0", "T2", "F1", "T3", "T4", "F2", "F3", "F4", "T5"}));
  EXPECT_EQ(interleave_rows({0, 1}, {}).size(), 2u);
}

}  // namespace
}  // namespace distlab::viz
