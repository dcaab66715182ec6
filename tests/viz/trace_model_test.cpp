// The trace model against naive recomputations: row order, stacking levels
// (no overlap inside a level, as few levels as the deepest overlap),
// statistics, flow pairing, incremental adds and hostile values.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "synthetic_trace.hpp"
#include "trace_model.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using trace::Event;

Event box(int rank, const std::string& lane, int64_t begin, int64_t end, const std::string& name = "e") {
  return Event{rank, lane, name, "fwd", begin, end, 0, -1, 0, {}};
}

std::vector<Event> synthetic(int ranks, int64_t events) {
  SyntheticTraceOptions o;
  o.ranks = ranks;
  o.events = events;
  return make_synthetic_trace(o);
}

TraceModel model_of(const std::vector<Event>& events) {
  TraceModel m;
  m.add(events);
  m.finalize();
  return m;
}

std::vector<Event> random_intervals(int n, uint32_t seed, int64_t span) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> at(0, span);
  // Lengths of at least 1: a zero-length event is checked on its own below.
  std::uniform_int_distribution<int64_t> length(1, span / 20);
  std::vector<Event> events;
  for (int i = 0; i < n; ++i) {
    const int64_t b = at(rng);
    events.push_back(box(i % 2, i % 3 == 0 ? "comm" : "compute", b, b + length(rng), "e" + std::to_string(i)));
    events.back().bytes = i;
  }
  return events;
}

TEST(TraceModel, RowsAreRankThenComputeCommThenOtherLanesByName) {
  TraceModel m;
  m.add({box(1, "comm", 0, 1), box(0, "stage1", 0, 1), box(0, "compute", 0, 1), box(0, "comm", 0, 1),
         box(0, "stage0", 0, 1)});
  m.finalize();
  std::vector<std::pair<int, std::string>> got;
  for (const auto& row : m.rows()) got.emplace_back(row.rank, row.lane);
  const std::vector<std::pair<int, std::string>> want = {
      {0, "compute"}, {0, "comm"}, {0, "stage0"}, {0, "stage1"}, {1, "comm"}};
  EXPECT_EQ(got, want);
  // Every event still knows its row after rows were inserted before it.
  for (uint32_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m.rows()[m.record(i).row].rank, m.record(i).rank);
    EXPECT_EQ(m.rows()[m.record(i).row].lane, m.event(i).lane);
  }
}

TEST(TraceModel, ManyRanksArrivingInAnyOrderEndUpSorted) {
  std::vector<Event> events;
  std::mt19937 rng(4);
  for (int i = 0; i < 20000; ++i) {
    const int rank = static_cast<int>(rng() % 5000);
    events.push_back(box(rank, rng() % 2 ? "comm" : "compute", i, i + 1));
  }
  TraceModel m;
  m.add(std::vector<Event>(events.begin(), events.begin() + 12000));
  m.finalize();
  m.add(std::vector<Event>(events.begin() + 12000, events.end()));
  m.finalize();
  for (size_t r = 1; r < m.rows().size(); ++r) {
    const auto& a = m.rows()[r - 1];
    const auto& b = m.rows()[r];
    EXPECT_TRUE(a.rank < b.rank || (a.rank == b.rank && lane_before(a.lane, b.lane)));
  }
  for (uint32_t i = 0; i < m.size(); ++i) testing_util::expect_same_event(m.event(i), events[i]);
}

TEST(TraceModel, LevelsNeverOverlapAndAreAsFewAsTheDeepestOverlap) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto events = random_intervals(3000, seed, 100000);
    TraceModel m;
    m.add(events);
    m.finalize();
    for (const auto& row : m.rows()) {
      size_t in_levels = 0;
      for (const Track& t : row.levels) {
        in_levels += t.events.size();
        for (size_t i = 0; i + 1 < t.events.size(); ++i) {
          EXPECT_LE(t.end_us[i], t.begin_us[i + 1]);
          EXPECT_LE(t.begin_us[i], t.begin_us[i + 1]);
        }
      }
      EXPECT_EQ(in_levels, row.events.size());
      // Naive deepest overlap: sweep +1 at each begin, -1 at each end (ends
      // first at a tie: touching intervals do not overlap).
      std::vector<std::pair<int64_t, int>> sweep;
      for (uint32_t i : row.events) {
        sweep.emplace_back(m.record(i).begin_us, +1);
        sweep.emplace_back(m.record(i).end_us, -1);
      }
      std::sort(sweep.begin(), sweep.end());
      int depth = 0;
      int deepest = 0;
      for (const auto& [t, d] : sweep) deepest = std::max(deepest, depth += d);
      EXPECT_EQ(row.levels.size(), static_cast<size_t>(deepest));
    }
  }
}

TEST(TraceModel, NestedSpansStackUnderTheirParent) {
  TraceModel m;
  m.add({box(0, "comm", 0, 100, "all_reduce"), box(0, "comm", 10, 20, "send"), box(0, "comm", 30, 40, "send"),
         box(0, "comm", 35, 38, "inner")});
  m.finalize();
  ASSERT_EQ(m.rows().size(), 1u);
  EXPECT_EQ(m.record(0).level, 0u);
  EXPECT_EQ(m.record(1).level, 1u);
  EXPECT_EQ(m.record(2).level, 1u);
  EXPECT_EQ(m.record(3).level, 2u);
}

TEST(TraceModel, AnInstantInsideASpanGetsItsOwnLevel) {
  TraceModel m;
  m.add({box(0, "comm", 0, 100), box(0, "comm", 50, 50), box(0, "comm", 100, 100)});
  m.finalize();
  EXPECT_EQ(m.record(1).level, 1u);  // drawn under the span, not hidden by it
  EXPECT_EQ(m.record(2).level, 0u);  // touching the end is not overlapping
}

TEST(TraceModel, StatisticsMatchANaiveCount) {
  const auto events = random_intervals(2000, 7, 20000);
  TraceModel m;
  m.add(events);
  m.finalize();
  for (const auto& row : m.rows()) {
    std::set<int64_t> covered;  // every microsecond some event of the row covers
    int64_t count = 0, total = 0, bytes = 0, longest = 0, shortest = INT64_MAX;
    for (const Event& e : events) {
      if (e.rank != row.rank || e.lane != row.lane) continue;
      ++count;
      total += e.end_us - e.begin_us;
      bytes += e.bytes;
      longest = std::max(longest, e.end_us - e.begin_us);
      shortest = std::min(shortest, e.end_us - e.begin_us);
      for (int64_t t = e.begin_us; t < e.end_us; ++t) covered.insert(t);
    }
    EXPECT_EQ(row.stats.count, count);
    EXPECT_EQ(row.stats.total_us, total);
    EXPECT_EQ(row.stats.busy_us, static_cast<int64_t>(covered.size()));
    EXPECT_EQ(row.stats.bytes, bytes);
    EXPECT_EQ(row.stats.max_us, longest);
    EXPECT_EQ(row.stats.min_us, shortest);
  }
}

TEST(TraceModel, EverySendIsPairedWithItsRecv) {
  const auto events = synthetic(5, 4000);
  const TraceModel m = model_of(events);
  // Naive: flows seen on both a send and a recv.
  std::map<uint64_t, std::pair<int, int>> ends;
  for (const Event& e : events)
    if (e.flow != 0) (e.category == "send" ? ends[e.flow].first : ends[e.flow].second) += 1;
  size_t paired = 0;
  for (const auto& [id, n] : ends) paired += n.first == 1 && n.second == 1;
  EXPECT_GT(paired, 0u);
  EXPECT_EQ(m.flow_count(), paired);
  size_t in_bundles = 0;
  for (const FlowBundle& b : m.flow_bundles()) {
    in_bundles += b.links.size();
    for (size_t i = 0; i < b.links.size(); ++i) {
      const FlowLink& l = b.links[i];
      EXPECT_EQ(m.text(m.record(l.send).category), "send");
      EXPECT_EQ(m.text(m.record(l.recv).category), "recv");
      EXPECT_EQ(m.record(l.send).flow, m.record(l.recv).flow);
      EXPECT_EQ(m.record(l.send).row, b.from_row);
      EXPECT_EQ(m.record(l.recv).row, b.to_row);
      EXPECT_EQ(*m.partner(l.send), l.recv);
      EXPECT_EQ(*m.partner(l.recv), l.send);
      if (i > 0) {
        EXPECT_LE(b.left_us[i - 1], b.left_us[i]);
      }
    }
  }
  EXPECT_EQ(in_bundles, paired);
}

TEST(TraceModel, KeepsEveryEventAsAdded) {
  const auto events = synthetic(4, 500);
  const TraceModel m = model_of(events);
  ASSERT_EQ(m.size(), events.size());
  for (uint32_t i = 0; i < m.size(); ++i) testing_util::expect_same_event(m.event(i), events[i]);
}

TEST(TraceModel, AddingInPiecesGivesTheSameRowsAsAddingAtOnce) {
  const auto events = synthetic(3, 3000);
  const TraceModel whole = model_of(events);
  TraceModel pieces;
  for (size_t at = 0; at < events.size(); at += 700) {
    pieces.add(std::vector<Event>(events.begin() + at, events.begin() + std::min(events.size(), at + 700)));
    pieces.finalize();
  }
  ASSERT_EQ(whole.rows().size(), pieces.rows().size());
  for (size_t r = 0; r < whole.rows().size(); ++r) {
    ASSERT_EQ(whole.rows()[r].levels.size(), pieces.rows()[r].levels.size());
    for (size_t l = 0; l < whole.rows()[r].levels.size(); ++l)
      EXPECT_EQ(whole.rows()[r].levels[l].events, pieces.rows()[r].levels[l].events);
  }
  EXPECT_EQ(whole.flow_count(), pieces.flow_count());
  EXPECT_EQ(whole.origin_us(), pieces.origin_us());
  EXPECT_EQ(whole.end_us(), pieces.end_us());
}

TEST(TraceModel, HostileTimesAreClampedNotOverflowed) {
  TraceModel m;
  m.add({box(0, "x", INT64_MIN, INT64_MAX), box(0, "x", 50, 10), box(0, "x", INT64_MAX, INT64_MAX),
         box(-7, "", -5, 5)});
  m.finalize();
  EXPECT_EQ(m.record(0).begin_us, -kMaxAbsTimeUs);
  EXPECT_EQ(m.record(0).end_us, kMaxAbsTimeUs);
  EXPECT_EQ(m.record(1).end_us, 50);  // a negative duration becomes an instant
  EXPECT_EQ(m.rows().front().rank, -7);
  EXPECT_GE(m.rows().back().stats.busy_us, 0);
}

}  // namespace
}  // namespace distlab::viz
