// The model's compact storage against plain recomputations: the flow table
// against std::unordered_map (random, sequential and strided ids), args
// shared between a row's events read back as added (through rollbacks too),
// and the stacking levels, tracks and arrow bundles against a naive greedy
// stacking and a naive pairing of sends and recvs, with repeated flow ids,
// unpaired ends, pieces finalized one at a time and a rollback.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <unordered_map>

#include "flow_table.hpp"
#include "synthetic_trace.hpp"
#include "trace_model.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using trace::Event;

void expect_table_matches(const std::vector<uint64_t>& ids) {
  FlowTable table;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> want;
  for (uint32_t i = 0; i < ids.size(); ++i) {
    FlowTable::Entry& e = table.at(ids[i]);
    auto& w = want.try_emplace(ids[i], FlowTable::kNone, FlowTable::kNone).first->second;
    (i % 2 == 0 ? e.send : e.recv) = i;
    (i % 2 == 0 ? w.first : w.second) = i;
  }
  ASSERT_EQ(table.size(), want.size());
  ASSERT_LE(table.size() * 4, table.capacity() * 3);
  for (const auto& [id, ends] : want) {
    const FlowTable::Entry* e = table.find(id);
    ASSERT_NE(e, nullptr) << id;
    EXPECT_EQ(e->id, id);
    EXPECT_EQ(e->send, ends.first) << id;
    EXPECT_EQ(e->recv, ends.second) << id;
  }
  size_t seen = 0;
  table.for_each([&](const FlowTable::Entry& e) {
    ++seen;
    EXPECT_EQ(want.count(e.id), 1u);
  });
  EXPECT_EQ(seen, want.size());
  // Absent ids, and 0 (never an id).
  EXPECT_EQ(table.find(0), nullptr);
  for (uint64_t probe : {uint64_t{0xdeadbeefcafef00d}, uint64_t{1} << 63, uint64_t{123456789}})
    if (want.count(probe) == 0) {
      EXPECT_EQ(table.find(probe), nullptr) << probe;
    }
}

TEST(FlowTable, FindsWhatAMapFindsForRandomSequentialAndStridedIds) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> random_ids;
  for (int i = 0; i < 30000; ++i) random_ids.push_back(rng() | 1);  // never 0
  for (int i = 0; i < 5000; ++i) random_ids.push_back(random_ids[rng() % random_ids.size()]);  // repeats
  expect_table_matches(random_ids);
  std::vector<uint64_t> sequential;
  for (uint64_t i = 1; i <= 20000; ++i) sequential.push_back(i);
  expect_table_matches(sequential);
  std::vector<uint64_t> strided;
  for (uint64_t i = 1; i <= 20000; ++i) strided.push_back(i << 32);
  expect_table_matches(strided);
  std::vector<uint64_t> sink_ids;
  for (int i = 0; i < 4000; ++i) sink_ids.push_back(trace::flow_id(i % 8, (i + 1) % 8, i / 64, i));
  expect_table_matches(sink_ids);
}

TEST(FlowTable, AReservedTableNeverMoves) {
  FlowTable table;
  table.reserve(1000);
  const size_t capacity = table.capacity();
  EXPECT_GE(capacity * 3, size_t{1000} * 4);
  EXPECT_LT(capacity, size_t{1000} * 2);  // sized to the need, not to a power of two above twice it
  const FlowTable::Entry* first = &table.at(trace::flow_id(0, 1, 0, 0));
  for (int i = 1; i < 1000; ++i) table.at(trace::flow_id(0, 1, 0, static_cast<uint64_t>(i)));
  EXPECT_EQ(table.capacity(), capacity);
  EXPECT_EQ(table.find(trace::flow_id(0, 1, 0, 0)), first);
  EXPECT_EQ(table.size(), 1000u);
}

Event event_with_args(int rank, const std::string& lane, int64_t at, std::vector<std::pair<std::string, std::string>> args) {
  Event e{rank, lane, "e", "fwd", at, at + 5, 0, -1, 0, {}};
  e.args = std::move(args);
  return e;
}

TEST(TraceModel, SharedArgsReadBackAsAddedThroughRollbacks) {
  std::mt19937 rng(11);
  const std::vector<std::vector<std::pair<std::string, std::string>>> sets = {
      {},
      {{"step", "0"}},
      {{"step", "1"}},
      {{"tag", "9"}, {"phase", "reduce-scatter"}},
      {{"phase", "reduce-scatter"}, {"tag", "9"}},  // the same pairs in another order
      {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}, {"e", "5"}, {"f", "6"}},  // past the cached slots
      {{"step", "0"}, {"step", "0"}},
  };
  std::vector<Event> added;
  TraceModel m;
  size_t naive_pairs = 0;
  for (int round = 0; round < 4; ++round) {
    const TraceModel::Checkpoint mark = m.checkpoint();
    const size_t kept = added.size();
    std::vector<Event> batch;
    for (int i = 0; i < 400; ++i) {
      // Runs of equal args in a row, rows interleaved, sets changing at random.
      const int rank = static_cast<int>(rng() % 3);
      const std::string lane = rng() % 2 == 0 ? "compute" : "comm";
      const auto& args = sets[(rng() % 4 == 0) ? rng() % sets.size() : (i / 7) % sets.size()];
      batch.push_back(event_with_args(rank, lane, i * 10, args));
    }
    m.add(batch);
    if (round % 2 == 1) {
      // Undone: what comes next must not read this batch's pairs.
      m.rollback(mark);
      added.resize(kept);
    } else {
      added.insert(added.end(), batch.begin(), batch.end());
      for (const Event& e : batch) naive_pairs += e.args.size();
    }
    m.finalize();
    ASSERT_EQ(m.size(), added.size());
    for (uint32_t i = 0; i < m.size(); ++i) testing_util::expect_same_event(m.event(i), added[i]);
  }
  EXPECT_GT(naive_pairs, 0u);
}

TEST(TraceModel, ARowsRepeatedArgsAreStoredOnce) {
  // One row, the same args 100 times, then other args, then the first again.
  TraceModel m;
  for (int i = 0; i < 100; ++i) m.add(event_with_args(0, "compute", i, {{"step", "0"}, {"phase", "fwd"}}));
  EXPECT_EQ(m.arg_pairs_stored(), 2u);
  m.add(event_with_args(0, "compute", 100, {{"step", "1"}}));
  m.add(event_with_args(0, "compute", 101, {{"step", "0"}, {"phase", "fwd"}}));
  EXPECT_EQ(m.arg_pairs_stored(), 5u);
  // The synthetic trace's sends and recvs of one phase share their args per
  // rank: about a quarter of one copy per event.
  SyntheticTraceOptions o;
  o.events = 20000;
  const std::vector<Event> events = make_synthetic_trace(o);
  TraceModel synthetic;
  synthetic.add(events);
  size_t naive_pairs = 0;
  for (const Event& e : events) naive_pairs += e.args.size();
  EXPECT_LT(synthetic.arg_pairs_stored() * 3, naive_pairs);
  for (uint32_t i = 0; i < synthetic.size(); i += 97) testing_util::expect_same_event(synthetic.event(i), events[i]);
}

// Naive greedy stacking: in (begin, longer first, index) order, each event
// on the lowest level whose last event ended by its begin.
void expect_levels_match_naive(const TraceModel& m) {
  for (const TraceRowData& row : m.rows()) {
    std::vector<uint32_t> order = row.events;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      const EventRecord& x = m.record(a);
      const EventRecord& y = m.record(b);
      if (x.begin_us != y.begin_us) return x.begin_us < y.begin_us;
      if (x.end_us != y.end_us) return x.end_us > y.end_us;
      return a < b;
    });
    EXPECT_EQ(row.events, order);
    std::vector<int64_t> last_end;
    std::vector<std::vector<uint32_t>> levels;
    for (uint32_t i : order) {
      const EventRecord& r = m.record(i);
      size_t level = 0;
      while (level < last_end.size() && last_end[level] > r.begin_us) ++level;
      if (level == last_end.size()) {
        last_end.push_back(0);
        levels.emplace_back();
      }
      last_end[level] = r.end_us;
      levels[level].push_back(i);
      EXPECT_EQ(r.level, level);
    }
    ASSERT_EQ(row.levels.size(), levels.size());
    for (size_t l = 0; l < levels.size(); ++l) {
      const Track& t = row.levels[l];
      EXPECT_EQ(t.events, levels[l]);
      ASSERT_EQ(t.begin_us.size(), levels[l].size());
      ASSERT_EQ(t.end_us.size(), levels[l].size());
      for (size_t k = 0; k < levels[l].size(); ++k) {
        EXPECT_EQ(t.begin_us[k], m.record(levels[l][k]).begin_us);
        EXPECT_EQ(t.end_us[k], m.record(levels[l][k]).end_us);
      }
    }
  }
}

// Naive pairing: per flow id, the last send and the last recv added; the
// arrows of each (send row, recv row) sorted by the send's begin, then index.
void expect_bundles_match_naive(const TraceModel& m) {
  std::map<uint64_t, std::pair<int64_t, int64_t>> ends;
  for (uint32_t i = 0; i < m.size(); ++i) {
    const EventRecord& r = m.record(i);
    const std::string& category = m.text(r.category);
    if (r.flow == 0 || (category != "send" && category != "recv")) continue;
    auto& e = ends.try_emplace(r.flow, -1, -1).first->second;
    (category == "send" ? e.first : e.second) = i;
  }
  std::map<std::pair<uint32_t, uint32_t>, std::vector<FlowLink>> want;
  size_t clamped = 0;
  for (const auto& [id, e] : ends) {
    if (e.first < 0 || e.second < 0) continue;
    const FlowLink link{static_cast<uint32_t>(e.first), static_cast<uint32_t>(e.second)};
    want[{m.record(link.send).row, m.record(link.recv).row}].push_back(link);
    clamped += m.record(link.recv).end_us < m.record(link.send).begin_us;
  }
  size_t total = 0;
  ASSERT_EQ(m.flow_bundles().size(), want.size());
  size_t b = 0;
  for (auto& [rows, links] : want) {
    std::sort(links.begin(), links.end(), [&](const FlowLink& x, const FlowLink& y) {
      const int64_t lx = m.record(x.send).begin_us;
      const int64_t ly = m.record(y.send).begin_us;
      return lx != ly ? lx < ly : x.send < y.send;
    });
    const FlowBundle& got = m.flow_bundles()[b++];
    EXPECT_EQ(got.from_row, rows.first);
    EXPECT_EQ(got.to_row, rows.second);
    ASSERT_EQ(got.links.size(), links.size());
    ASSERT_EQ(got.left_us.size(), links.size());
    ASSERT_EQ(got.right_us.size(), links.size());
    ASSERT_EQ(got.right_max_us.size(), links.size());
    int64_t running = INT64_MIN;
    for (size_t k = 0; k < links.size(); ++k) {
      EXPECT_EQ(got.links[k].send, links[k].send);
      EXPECT_EQ(got.links[k].recv, links[k].recv);
      const int64_t left = m.record(links[k].send).begin_us;
      const int64_t right = std::max(m.record(links[k].recv).end_us, left);
      running = std::max(running, right);
      EXPECT_EQ(got.left_us[k], left);
      EXPECT_EQ(got.right_us[k], right);
      EXPECT_EQ(got.right_max_us[k], running);
      EXPECT_EQ(*m.partner(links[k].send), links[k].recv);
      EXPECT_EQ(*m.partner(links[k].recv), links[k].send);
    }
    total += links.size();
  }
  EXPECT_EQ(m.flow_count(), total);
  EXPECT_EQ(m.clamped_flow_count(), clamped);
}

// Sends and recvs among 4 ranks with overlapping spans, ties of begin and
// end, ids used twice (the later send or recv wins), unpaired ends, recvs
// ending before their send begins, and events with a flow that are neither.
std::vector<Event> tangled_flows(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<Event> events;
  for (int i = 0; i < n; ++i) {
    const uint64_t id = 1 + rng() % static_cast<uint32_t>(n / 3);
    const int from = static_cast<int>(rng() % 4);
    const int to = static_cast<int>(rng() % 4);
    const int64_t at = static_cast<int64_t>(rng() % 2000);
    const int64_t length = static_cast<int64_t>(rng() % 4) * 50;
    const int kind = static_cast<int>(rng() % 5);
    const char* category = kind < 2 ? "send" : kind < 4 ? "recv" : "collective";
    events.push_back(Event{kind < 2 ? from : to, rng() % 3 == 0 ? "stage0" : "comm", category, category, at,
                           at + length, 64, kind < 2 ? to : from, id, {}});
  }
  return events;
}

TEST(TraceModel, LevelsTracksAndArrowsMatchANaiveRecomputation) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<Event> events = tangled_flows(seed, 3000);
    TraceModel whole;
    whole.add(events);
    whole.finalize();
    expect_levels_match_naive(whole);
    expect_bundles_match_naive(whole);

    // Pieces, finalized as the live feed does, then a batch rolled back.
    TraceModel pieces;
    for (size_t at = 0; at < events.size(); at += 500) {
      pieces.add(std::vector<Event>(events.begin() + at, events.begin() + std::min(events.size(), at + 500)));
      pieces.finalize();
      expect_bundles_match_naive(pieces);
    }
    const TraceModel::Checkpoint mark = pieces.checkpoint();
    pieces.add(tangled_flows(seed + 100, 700));
    pieces.finalize();
    pieces.rollback(mark);
    pieces.finalize();
    expect_levels_match_naive(pieces);
    expect_bundles_match_naive(pieces);
    ASSERT_EQ(pieces.size(), whole.size());
    for (size_t r = 0; r < whole.rows().size(); ++r)
      EXPECT_EQ(pieces.rows()[r].events, whole.rows()[r].events);
    EXPECT_EQ(pieces.flow_count(), whole.flow_count());
  }
}

TEST(TraceModel, TheSyntheticTraceMatchesTheNaiveRecomputation) {
  SyntheticTraceOptions o;
  o.ranks = 4;
  o.events = 20000;
  TraceModel m;
  m.add(make_synthetic_trace(o));
  m.finalize();
  EXPECT_GT(m.flow_count(), 5000u);
  expect_levels_match_naive(m);
  expect_bundles_match_naive(m);
}

}  // namespace
}  // namespace distlab::viz
