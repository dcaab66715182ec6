// Memory counter samples: the Memory panel's grouping (stages, ranks, the
// peak, the formula) against a brute-force computation over the same
// synthetic samples, the TraceModel's counter store beside its rows, and
// samples written through the library's sink and read back by the loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "memory_model.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"
#include "trace_panel.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using testing_util::temp_path;
using testing_util::write_with_library;

constexpr int kRanks = 4;
constexpr const char* kSeries[] = {"parameters", "gradients", "optimizer state", "buffers", "activations"};

trace::Event counter(int rank, const std::string& name, int64_t at_us, const std::vector<int64_t>& values) {
  trace::CounterValues series;
  for (size_t s = 0; s < values.size(); ++s) series.emplace_back(kSeries[s], values[s]);
  return trace::counter_event(rank, name, series, at_us);
}

// A run of DDP, ZeRO-1, ZeRO-2 and a naive ZeRO-1 on 4 ranks: per stage and
// rank 6 samples (before and after 3 steps) whose largest is the 4th, then
// the formula; ZeRO-3's formula alone, never measured; counters and events
// that are no memory samples.
std::vector<trace::Event> synthetic_run(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> bytes(1'000, 9'000'000);
  std::vector<trace::Event> events;
  int64_t t = 5'000'000;
  const std::vector<std::string> stages = {"DDP", "ZeRO-1", "ZeRO-2", "naive ZeRO-1"};
  for (size_t s = 0; s < stages.size(); ++s) {
    for (int k = 0; k < 6; ++k) {
      for (int rank = 0; rank < kRanks; ++rank) {
        std::vector<int64_t> v = {bytes(rng), bytes(rng), bytes(rng), bytes(rng) / 100, bytes(rng)};
        if (k == 3) v[4] += 40'000'000;  // the peak: activations held during the 2nd step
        if (k == 5) v[1] = v[4] = 0;     // after the last step: gradients and activations freed
        events.push_back(counter(rank, "memory " + stages[s], t + rank, v));
      }
      t += 1000;
    }
    for (int rank = 0; rank < kRanks; ++rank)
      events.push_back(counter(rank, "accounting " + stages[s], t, {int64_t{100} * (rank + 1) * static_cast<int64_t>(s + 1), 50, 7, 0, 0}));
    t += 1000;
  }
  for (int rank = 0; rank < kRanks; ++rank)
    events.push_back(counter(rank, "accounting ZeRO-3", t, {25, 25, 50, 0, 0}));
  // Not memory samples: other counters, a name that only begins alike, a
  // formula without a stage, and an interval named like a sample.
  events.push_back(counter(0, "bytes in flight", t + 5, {999'999'999}));
  events.push_back(counter(1, "memoryless", t + 6, {999'999'999}));
  events.push_back(counter(2, "accounting", t + 7, {999'999'999}));
  events.push_back(trace::Event{3, "compute", "memory DDP", "fwd", t, t + 100, 0, -1, 0, {{"parameters", "999999999"}}});
  return events;
}

// What the model must find, worked out over the raw events: for each
// counter named exactly "memory " + stage or "accounting " + stage on a
// rank, the totals of the five series read back from their text.
struct Expected {
  std::vector<std::string> stages;  // by first sample's time
  std::map<std::pair<std::string, int>, int64_t> peak_total, peak_time, formula_total;
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> timeline;  // rank -> (time, total), by time
};

Expected brute_force(const std::vector<trace::Event>& events) {
  Expected x;
  std::map<std::string, int64_t> first_time;
  auto total_of = [](const trace::Event& e) {
    int64_t sum = 0;
    for (const char* name : kSeries) sum += std::stoll(e.arg(name, "0"));
    return sum;
  };
  for (const trace::Event& e : events) {
    if (e.category != trace::kCounterCategory) continue;
    for (const std::string prefix : {"memory ", "accounting "}) {
      if (e.name.size() <= prefix.size() || e.name.substr(0, prefix.size()) != prefix) continue;
      const std::string stage = e.name.substr(prefix.size());
      if (!first_time.count(stage) || e.begin_us < first_time[stage]) first_time[stage] = e.begin_us;
      const auto key = std::make_pair(stage, e.rank);
      const int64_t total = total_of(e);
      if (prefix == "accounting ") {
        x.formula_total[key] = total;  // one per stage and rank here
        continue;
      }
      x.timeline[e.rank].emplace_back(e.begin_us, total);
      const bool better = !x.peak_total.count(key) || total > x.peak_total[key] ||
                          (total == x.peak_total[key] && e.begin_us < x.peak_time[key]);
      if (better) {
        x.peak_total[key] = total;
        x.peak_time[key] = e.begin_us;
      }
    }
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [stage, time] : first_time) order.emplace_back(time, stage);
  std::sort(order.begin(), order.end());
  for (const auto& [time, stage] : order) x.stages.push_back(stage);
  for (auto& [rank, line] : x.timeline) std::sort(line.begin(), line.end());
  return x;
}

void expect_model_matches(const MemoryModel& m, const Expected& x, const std::string& where) {
  EXPECT_EQ(m.stages(), x.stages) << where;
  for (const std::string& stage : x.stages) {
    std::vector<int> ranks;
    for (int r = 0; r < kRanks; ++r)
      if (x.peak_total.count({stage, r}) || x.formula_total.count({stage, r})) ranks.push_back(r);
    EXPECT_EQ(m.ranks_of(stage), ranks) << where << " " << stage;
    for (int r : ranks) {
      const auto key = std::make_pair(stage, r);
      const std::optional<MemorySample> peak = m.peak(stage, r);
      ASSERT_EQ(peak.has_value(), x.peak_total.count(key) > 0) << where << " " << stage << " rank " << r;
      if (peak) {
        EXPECT_EQ(peak->total(), x.peak_total.at(key)) << where << " " << stage << " rank " << r;
        EXPECT_EQ(peak->at_us, x.peak_time.at(key)) << where << " " << stage << " rank " << r;
        EXPECT_EQ(peak->rank, r);
      }
      const std::optional<MemorySample> formula = m.accounting(stage, r);
      ASSERT_EQ(formula.has_value(), x.formula_total.count(key) > 0) << where << " " << stage << " rank " << r;
      if (formula) {
        EXPECT_EQ(formula->total(), x.formula_total.at(key)) << where << " " << stage << " rank " << r;
      }
    }
  }
  std::vector<int> timeline_ranks;
  for (const auto& [rank, line] : x.timeline) timeline_ranks.push_back(rank);
  EXPECT_EQ(m.timeline_ranks(), timeline_ranks) << where;
  int64_t max_measured = 0;
  for (const auto& [rank, line] : x.timeline) {
    const std::vector<MemoryPoint>& got = m.timeline(rank);
    ASSERT_EQ(got.size(), line.size()) << where << " rank " << rank;
    for (size_t i = 0; i < line.size(); ++i) {
      EXPECT_EQ(got[i].at_us, line[i].first) << where << " rank " << rank << " point " << i;
      EXPECT_EQ(got[i].total, line[i].second) << where << " rank " << rank << " point " << i;
      max_measured = std::max(max_measured, line[i].second);
    }
  }
  EXPECT_EQ(m.max_measured_total(), max_measured) << where;
}

TEST(MemoryModel, GroupsByStageAndRankAsABruteForceDoes) {
  const std::vector<trace::Event> events = synthetic_run(7);
  const Expected x = brute_force(events);
  // The fixture is what it says: 5 stages, the peak never the last sample,
  // ZeRO-3 with a formula only.
  ASSERT_EQ(x.stages, (std::vector<std::string>{"DDP", "ZeRO-1", "ZeRO-2", "naive ZeRO-1", "ZeRO-3"}));
  EXPECT_FALSE(x.peak_total.count({"ZeRO-3", 0}));
  EXPECT_TRUE(x.formula_total.count({"ZeRO-3", 0}));
  for (const auto& [key, time] : x.peak_time) {
    int64_t last = 0;
    for (const trace::Event& e : events)
      if (e.name == "memory " + key.first && e.rank == key.second) last = std::max(last, e.begin_us);
    EXPECT_LT(time, last) << key.first << " rank " << key.second;
  }

  MemoryModel m;
  size_t kept = 0;
  for (const trace::Event& e : events) kept += m.add(e);
  EXPECT_EQ(kept, events.size() - 4);  // the four impostors
  expect_model_matches(m, x, "in order");

  // Any arrival order (ranks of a live run interleave): the same answer.
  std::vector<trace::Event> shuffled = events;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
  MemoryModel s;
  for (const trace::Event& e : shuffled) s.add(e);
  expect_model_matches(s, x, "shuffled");
}

TEST(MemoryModel, PeakTiesGoToTheEarliestAndTheLatestFormulaWins) {
  MemoryModel m;
  m.add(counter(0, "memory DDP", 300, {10, 20}));
  m.add(counter(0, "memory DDP", 100, {20, 10}));  // the same total, earlier: the peak
  m.add(counter(0, "memory DDP", 200, {5, 5}));
  m.add(counter(0, "accounting DDP", 400, {1}));
  m.add(counter(0, "accounting DDP", 350, {2}));  // older than the one above
  ASSERT_TRUE(m.peak("DDP", 0).has_value());
  EXPECT_EQ(m.peak("DDP", 0)->at_us, 100);
  EXPECT_EQ(m.peak("DDP", 0)->bytes[0], 20);
  EXPECT_EQ(m.accounting("DDP", 0)->total(), 1);
  EXPECT_EQ(m.measured_count("DDP", 0), 3u);
  // The step line is in time order whatever the arrival order.
  const auto& line = m.timeline(0);
  ASSERT_EQ(line.size(), 3u);
  EXPECT_EQ(line[0].at_us, 100);
  EXPECT_EQ(line[1].at_us, 200);
  EXPECT_EQ(line[2].at_us, 300);
  EXPECT_EQ(m.max_bar_total(), 30);
}

TEST(MemoryModel, NamesAndValues) {
  EXPECT_EQ(parse_memory_counter("memory ZeRO-3")->stage, "ZeRO-3");
  EXPECT_EQ(parse_memory_counter("memory naive ZeRO-1")->stage, "naive ZeRO-1");
  EXPECT_EQ(parse_memory_counter("accounting DDP")->kind, MemoryKind::kAccounting);
  EXPECT_EQ(parse_memory_counter("memory")->stage, "");  // a sample of no stage
  for (const char* other : {"accounting", "memory ", "memoryless", "Memory DDP", "peak memory", ""})
    EXPECT_FALSE(parse_memory_counter(other).has_value()) << other;
  // Values as the readers give them back: text, in key order; a foreign
  // counter's real number rounded; unreadable ones 0; a missing series 0.
  trace::Event e = trace::counter_event(1, "memory DDP", {}, 42);
  e.args = {{"activations", "1.5e3"}, {"gradients", "7"}, {"optimizer state", "oops"}, {"parameters", "9007199254740993"},
            {"workspace", "11"}};
  const MemorySample s = memory_sample_of(e);
  EXPECT_EQ(s.bytes[0], 9007199254740993);  // past 2^53: read as an integer, not a double
  EXPECT_EQ(s.bytes[1], 7);
  EXPECT_EQ(s.bytes[2], 0);
  EXPECT_EQ(s.bytes[3], 0);
  EXPECT_EQ(s.bytes[4], 1500);
  EXPECT_EQ(s.total(), 9007199254740993 + 7 + 1500);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.at_us, 42);
}

// Intervals alone, and the same intervals with counter samples in between:
// rows, levels, statistics and arrows are identical; the samples are in the
// store, given back as added.
TEST(TraceModelCounters, KeptApartFromTheRows) {
  std::vector<trace::Event> intervals;
  for (int rank = 0; rank < 2; ++rank)
    for (int i = 0; i < 50; ++i)
      intervals.push_back(trace::Event{rank, i % 3 == 0 ? "comm" : "compute", "e" + std::to_string(i), "fwd",
                                       1000 + 40 * i, 1000 + 40 * i + 25 + i % 7, 8 * i, -1, 0, {{"i", std::to_string(i)}}});
  std::vector<trace::Event> counters = {counter(0, "memory DDP", 500, {1, 2, 3, 4, 5}),
                                        counter(1, "memory DDP", 1500, {5, 4, 3, 2, 1}),
                                        counter(0, "bytes in flight", 9000, {77})};
  std::vector<trace::Event> mixed;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (i % 30 == 5 && i / 30 < counters.size()) mixed.push_back(counters[i / 30]);
    mixed.push_back(intervals[i]);
  }
  TraceModel plain, with;
  plain.add(intervals);
  with.add(mixed);
  plain.finalize();
  with.finalize();
  ASSERT_EQ(with.size(), plain.size());
  ASSERT_EQ(with.rows().size(), plain.rows().size());
  for (size_t r = 0; r < plain.rows().size(); ++r) {
    const TraceRowData& a = plain.rows()[r];
    const TraceRowData& b = with.rows()[r];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.lane, b.lane);
    EXPECT_EQ(a.levels.size(), b.levels.size());
    EXPECT_EQ(a.stats.count, b.stats.count);
    EXPECT_EQ(a.stats.busy_us, b.stats.busy_us);
    EXPECT_EQ(a.stats.total_us, b.stats.total_us);
    EXPECT_EQ(a.stats.min_us, b.stats.min_us);
    EXPECT_EQ(a.stats.max_us, b.stats.max_us);
    EXPECT_EQ(a.stats.bytes, b.stats.bytes);
    EXPECT_EQ(a.stats.first_us, b.stats.first_us);
    EXPECT_EQ(a.stats.last_us, b.stats.last_us);
  }
  for (uint32_t i = 0; i < plain.size(); ++i)
    testing_util::expect_same_event(plain.event(i), with.event(i));
  ASSERT_EQ(with.counter_count(), counters.size());
  EXPECT_EQ(plain.counter_count(), 0u);
  for (size_t i = 0; i < counters.size(); ++i) {
    const trace::Event got = with.counter_event(i);
    EXPECT_EQ(got.args, counters[i].args);  // series in the order given
    testing_util::expect_same_event(got, counters[i]);
  }
  // The samples count for the time shown: one before the first interval
  // and one after the last.
  EXPECT_EQ(plain.origin_us(), 1000);
  EXPECT_EQ(with.origin_us(), 500);
  EXPECT_EQ(with.end_us(), 9000);
}

TEST(TraceModelCounters, RollbackAndClockShiftTakeThemToo) {
  TraceModel m;
  m.add(trace::Event{0, "compute", "a", "fwd", 100, 200, 0, -1, 0, {}});
  m.add(counter(0, "memory DDP", 150, {1}));
  const TraceModel::Checkpoint mark = m.checkpoint();
  m.add(counter(1, "memory DDP", 50, {2}));
  m.add(counter(0, "memory DDP", 300, {3}));
  EXPECT_EQ(m.counter_count(), 3u);
  EXPECT_EQ(m.origin_us(), 50);
  m.shift_rank(mark, 1, 1000);  // rank 1's clock is 1 ms behind rank 0's
  EXPECT_EQ(m.counter(1).at_us, 1050);
  EXPECT_EQ(m.counter(2).at_us, 300);  // rank 0: untouched
  EXPECT_EQ(m.counter(0).at_us, 150);  // before the mark: untouched
  EXPECT_EQ(m.origin_us(), 100);
  EXPECT_EQ(m.end_us(), 1050);
  m.rollback(mark);
  EXPECT_EQ(m.counter_count(), 1u);
  EXPECT_EQ(m.counter_event(0).arg("parameters"), "1");
  EXPECT_EQ(m.end_us(), 200);
}

// Written by the library's sink, read by the viewer's loader (both ways:
// collected events, and straight into a TraceModel): the same peaks and
// formulas as the events that were written, and no warning for a file of
// samples alone.
TEST(MemoryFile, RoundTripThroughTheLibrarysSinkKeepsThePeaks) {
  const std::vector<trace::Event> events = synthetic_run(11);
  const Expected x = brute_force(events);
  MemoryModel written;
  for (const trace::Event& e : events) written.add(e);

  const std::string path = temp_path("memory_round_trip.json");
  write_with_library(path, events);
  const LoadedTrace loaded = load_trace_file(path);
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.front();
  MemoryModel read;
  for (const trace::Event& e : loaded.events) read.add(e);
  expect_model_matches(read, x, "load_trace_file");
  for (const std::string& stage : x.stages)
    for (int r = 0; r < kRanks; ++r) {
      const auto a = written.peak(stage, r), b = read.peak(stage, r);
      ASSERT_EQ(a.has_value(), b.has_value());
      if (a) {
        EXPECT_EQ(a->bytes, b->bytes) << stage << " rank " << r;
      }
    }

  TracePanel panel;
  panel.open_files({path});
  EXPECT_EQ(panel.model().size(), 1u);  // the one interval
  EXPECT_EQ(panel.model().counter_count(), events.size() - 1);
  expect_model_matches(panel.memory(), x, "open_files");
  for (const std::string& m : panel.messages()) EXPECT_EQ(m.find("warning"), std::string::npos) << m;

  // Samples only: no interval at all, and still no warning.
  std::vector<trace::Event> only;
  for (const trace::Event& e : events)
    if (e.is_counter()) only.push_back(e);
  const std::string only_path = temp_path("memory_only.json");
  write_with_library(only_path, only);
  TraceModel model;
  const LoadReport report = load_trace_into(only_path, model);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
  EXPECT_EQ(model.size(), 0u);
  EXPECT_EQ(model.counter_count(), only.size());
  // An empty trace still says so.
  const std::string empty_path = temp_path("memory_empty.json");
  write_with_library(empty_path, {});
  EXPECT_EQ(load_trace_file(empty_path).warnings.size(), 1u);
}

}  // namespace
}  // namespace distlab::viz
