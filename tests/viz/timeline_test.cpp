// The shared timeline's arithmetic: time <-> pixels, zoom that keeps the
// anchor still, fit, and the printed units.
#include <gtest/gtest.h>

#include <random>

#include "timeline.hpp"

namespace distlab::viz {
namespace {

TEST(TimeAxis, MapsTheEndsAndInvertsEverywhere) {
  const TimeAxis axis{2.0, 7.0, 100.0f, 1100.0f};
  EXPECT_FLOAT_EQ(axis.x_of(2.0), 100.0f);
  EXPECT_FLOAT_EQ(axis.x_of(7.0), 1100.0f);
  EXPECT_FLOAT_EQ(axis.x_of(4.5), 600.0f);  // halfway in time is halfway across
  EXPECT_DOUBLE_EQ(axis.seconds_per_pixel(), 5.0 / 1000.0);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> t(-10.0, 20.0);
  for (int i = 0; i < 1000; ++i) {
    const double s = t(rng);
    EXPECT_NEAR(axis.time_at(axis.x_of(s)), s, 1e-5);
  }
}

TEST(TimelineView, ZoomKeepsTheAnchorUnderTheSamePixel) {
  TimelineView view;
  view.begin_s = 1.0;
  view.end_s = 3.0;
  for (double anchor : {1.0, 1.3, 2.0, 2.9}) {
    for (double factor : {0.5, 0.8, 1.25, 4.0}) {
      TimelineView v = view;
      const TimeAxis before{v.begin_s, v.end_s, 0.0f, 800.0f};
      v.zoom_at(anchor, factor);
      const TimeAxis after{v.begin_s, v.end_s, 0.0f, 800.0f};
      EXPECT_NEAR(after.x_of(anchor), before.x_of(anchor), 1e-3);
      EXPECT_NEAR(v.end_s - v.begin_s, 2.0 * factor, 1e-12);
    }
  }
}

TEST(TimelineView, ZoomStopsAtTheLimitsAndPanShifts) {
  TimelineView v;
  v.begin_s = 0.0;
  v.end_s = 1.0;
  for (int i = 0; i < 200; ++i) v.zoom_at(0.5, 0.5);
  EXPECT_GT(v.end_s - v.begin_s, 0.0);
  EXPECT_NEAR(v.end_s - v.begin_s, 1e-7, 1e-12);
  v.pan(2.0);
  EXPECT_NEAR(v.begin_s + v.end_s, 2 * 2.5, 1e-6);
}

TEST(TimelineView, FitShowsTheWholeRangeWithAMargin) {
  TimelineView v;
  v.fit(10.0, 20.0);
  EXPECT_LT(v.begin_s, 10.0);
  EXPECT_GT(v.end_s, 20.0);
  EXPECT_NEAR(v.end_s - v.begin_s, 10.0 * 1.04, 1e-9);
  v.fit(5.0, 5.0);  // an empty range still gives a usable view
  EXPECT_GT(v.end_s, v.begin_s);
}

TEST(Format, DurationsAndBytesInReadableUnits) {
  EXPECT_EQ(format_duration(35.0), "35 s");
  EXPECT_EQ(format_duration(0.0015), "1.5 ms");
  EXPECT_EQ(format_duration(12e-6), "12 us");
  EXPECT_EQ(format_duration(0.0), "0 s");
  EXPECT_EQ(format_bytes(5e6), "5 MB");
  EXPECT_EQ(format_bytes(1.25e6), "1.25 MB");
  EXPECT_EQ(format_bytes(512), "512 B");
}

}  // namespace
}  // namespace distlab::viz
