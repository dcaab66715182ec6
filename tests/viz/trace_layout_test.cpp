// Visible boxes and arrows: the binary-search-and-jump layout against a
// naive one that walks every event, and the bounds that make a frame of a
// million events cheap.
#include <gtest/gtest.h>

#include <random>

#include "synthetic_trace.hpp"
#include "trace_layout.hpp"

namespace distlab::viz {
namespace {

// One non-overlapping track of n events with random gaps and lengths (us).
Track random_track(int n, uint32_t seed, int64_t max_gap, int64_t max_length) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> gap(0, max_gap);
  std::uniform_int_distribution<int64_t> length(0, max_length);
  Track t;
  int64_t at = 1000;
  for (int i = 0; i < n; ++i) {
    at += gap(rng);
    const int64_t end = at + length(rng);
    t.begin_us.push_back(at);
    t.end_us.push_back(end);
    t.events.push_back(static_cast<uint32_t>(i));
    at = end;
  }
  return t;
}

// The reference: every event in order; a narrow one starts a group that
// takes each next event starting within min_px of the group's right edge,
// unless that event is wide enough to stand alone, and stops at the view's
// right edge.
std::vector<BoxSpan> naive_layout(const Track& t, int64_t origin, const TimeAxis& axis, float min_px) {
  auto x = [&](int64_t us) { return axis.x_of((static_cast<double>(us) - origin) * 1e-6); };
  auto us = [&](float px) { return origin + axis.time_at(px) * 1e6; };
  const double view_begin = origin + axis.begin_s * 1e6;
  const double view_end = origin + axis.end_s * 1e6;
  std::vector<BoxSpan> out;
  size_t i = 0;
  const size_t n = t.events.size();
  while (i < n && static_cast<double>(t.end_us[i]) < view_begin) ++i;
  while (i < n && static_cast<double>(t.begin_us[i]) <= view_end) {
    const float x0 = x(t.begin_us[i]);
    const float x1 = x(t.end_us[i]);
    if (x1 - x0 >= min_px) {
      out.push_back({x0, x1, t.events[i], 1});
      ++i;
      continue;
    }
    float gx1 = x1;
    size_t j = i + 1;
    while (j < n && gx1 <= axis.x1 && static_cast<double>(t.begin_us[j]) <= us(gx1 + min_px) &&
           x(t.end_us[j]) - x(t.begin_us[j]) < min_px) {
      gx1 = std::max(gx1, x(t.end_us[j]));
      ++j;
    }
    out.push_back({x0, std::max(gx1, x0 + 1.0f), t.events[i], static_cast<uint32_t>(j - i)});
    i = j;
  }
  return out;
}

void expect_same_boxes(const std::vector<BoxSpan>& got, const std::vector<BoxSpan>& want, float right_edge) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].event, want[k].event) << "box " << k;
    EXPECT_FLOAT_EQ(got[k].x0, want[k].x0) << "box " << k;
    // A group running off the right edge may take a few more (invisible)
    // events in one than in the other; on screen they are the same.
    if (want[k].x1 <= right_edge && got[k].x1 <= right_edge) {
      EXPECT_EQ(got[k].count, want[k].count) << "box " << k;
      EXPECT_FLOAT_EQ(got[k].x1, want[k].x1) << "box " << k;
    }
  }
}

// layout_track against the naive walk at five zoom levels and three places.
void expect_naive_boxes_at_every_zoom(const Track& t) {
  const int64_t origin = t.begin_us.front();
  const double span_s = (t.end_us.back() - origin) * 1e-6;
  for (double fraction : {1.0, 0.3, 0.05, 0.01, 0.001}) {
    for (double start : {0.0, 0.37, 0.9}) {
      const double begin = span_s * start * (1.0 - fraction);
      const TimeAxis axis{begin, begin + span_s * fraction, 150.0f, 1450.0f};
      std::vector<BoxSpan> got;
      layout_track(t, origin, axis, kMergePx, got);
      expect_same_boxes(got, naive_layout(t, origin, axis, kMergePx), axis.x1);
    }
  }
}

TEST(LayoutTrack, SameBoxesAsWalkingEveryEventAtEveryZoom) {
  expect_naive_boxes_at_every_zoom(random_track(20000, 5, 30, 40));
}

// The same with the track's block index (as TraceModel::finalize leaves
// it): runs of events merged anyway are stepped over a block at a time.
TEST(LayoutTrack, IndexedTrackSameBoxesAsWalkingEveryEvent) {
  // Dense runs, sparse runs, and wide events among them.
  for (const auto& [gap, length] : {std::pair<int64_t, int64_t>{30, 40}, {3, 3}, {0, 1}, {2000, 50}}) {
    Track t = random_track(50000, 7, gap, length);
    for (size_t i = 5000; i < t.begin_us.size(); i += 7919) t.end_us[i] = t.begin_us[i];  // stays ordered
    t.index_blocks();
    expect_naive_boxes_at_every_zoom(t);
  }
}

TEST(LayoutTrack, MixedWideAndNarrowEventsAreEachShown) {
  // Wide events between bursts of tiny ones: every wide one is its own box.
  Track t;
  int64_t at = 0;
  for (int burst = 0; burst < 50; ++burst) {
    for (int k = 0; k < 200; ++k, at += 2) {
      t.begin_us.push_back(at);
      t.end_us.push_back(at + 1);
      t.events.push_back(static_cast<uint32_t>(t.events.size()));
    }
    t.begin_us.push_back(at);
    t.end_us.push_back(at + 5000);
    t.events.push_back(static_cast<uint32_t>(t.events.size()));
    at += 5000;
  }
  const TimeAxis axis{0.0, at * 1e-6, 0.0f, 1000.0f};
  for (bool indexed : {false, true}) {
    if (indexed) t.index_blocks();
    std::vector<BoxSpan> got;
    layout_track(t, 0, axis, kMergePx, got);
    expect_same_boxes(got, naive_layout(t, 0, axis, kMergePx), axis.x1);
    ASSERT_EQ(got.size(), 100u);  // a merged burst, then the wide event, 50 times
    uint32_t counted = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].count, k % 2 == 0 ? 200u : 1u);
      counted += got[k].count;
    }
    EXPECT_EQ(counted, t.events.size());
  }
}

TEST(LayoutTrack, AFrameDrawsAboutOneBoxPerTwoPixelsWhateverTheTraceSize) {
  Track t = random_track(1'000'000, 9, 3, 3);
  t.index_blocks();
  const int64_t origin = t.begin_us.front();
  const TimeAxis axis{0.0, (t.end_us.back() - origin) * 1e-6, 0.0f, 1800.0f};
  std::vector<BoxSpan> got;
  layout_track(t, origin, axis, kMergePx, got);
  EXPECT_LE(got.size(), static_cast<size_t>(1800 / kMergePx) + 2);
  uint64_t counted = 0;
  for (const BoxSpan& b : got) counted += b.count;
  EXPECT_EQ(counted, t.events.size());  // nothing lost, all merged
  for (size_t k = 1; k < got.size(); ++k) EXPECT_GE(got[k].x0, got[k - 1].x1 - 1e-3f);
}

TEST(LayoutTrack, NothingOutsideTheView) {
  const Track t = random_track(1000, 2, 100, 100);
  const int64_t origin = t.begin_us.front();
  std::vector<BoxSpan> got;
  layout_track(t, origin, TimeAxis{-10.0, -5.0, 0.0f, 500.0f}, kMergePx, got);
  EXPECT_TRUE(got.empty());
  layout_track(t, origin, TimeAxis{1e3, 1e3 + 1, 0.0f, 500.0f}, kMergePx, got);
  EXPECT_TRUE(got.empty());
}

TEST(LayoutFlows, EveryVisibleArrowZoomedInThinnedZoomedOutNeverAWrongOne) {
  SyntheticTraceOptions o;
  o.ranks = 4;
  o.events = 20000;
  TraceModel m;
  m.add(make_synthetic_trace(o));
  m.finalize();
  const double span_s = m.seconds_of(m.end_us());
  for (double fraction : {1.0, 0.1, 0.01, 0.001}) {
    const double begin = span_s * 0.4;
    const TimeAxis axis{begin, begin + span_s * fraction, 100.0f, 1300.0f};
    const double view_begin = m.origin_us() + axis.begin_s * 1e6;
    const double view_end = m.origin_us() + axis.end_s * 1e6;
    auto wide = [&](uint32_t e) {
      const EventRecord& r = m.record(e);
      return axis.x_of(m.seconds_of(r.end_us)) - axis.x_of(m.seconds_of(r.begin_us)) >= kMergePx;
    };
    size_t drawn = 0;
    size_t wanted = 0;
    for (const FlowBundle& b : m.flow_bundles()) {
      std::vector<FlowLink> got;
      layout_flows(m, b, axis, kArrowSpacingPx, got);
      drawn += got.size();
      // Naive: every arrow that meets the view and has an end one can see.
      std::vector<uint32_t> want;
      for (size_t i = 0; i < b.links.size(); ++i)
        if (b.left_us[i] <= view_end && b.right_us[i] >= view_begin && (wide(b.links[i].send) || wide(b.links[i].recv)))
          want.push_back(b.links[i].send);
      wanted += want.size();
      for (const FlowLink& l : got) EXPECT_NE(std::find(want.begin(), want.end(), l.send), want.end());
      if (fraction <= 0.001) {
        EXPECT_EQ(got.size(), want.size());
      }
      EXPECT_LE(got.size(), (axis.x1 - axis.x0) / kArrowSpacingPx + 2);
    }
    EXPECT_LE(drawn, wanted);
    if (fraction <= 0.01) {
      EXPECT_GT(drawn, 0u);
    }
    if (fraction >= 1.0) {
      EXPECT_EQ(wanted, 0u);  // every send and recv is sub-pixel: no arrows
    }
  }
}

}  // namespace
}  // namespace distlab::viz
