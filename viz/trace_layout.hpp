// Where a trace's boxes and arrows go for one frame: pure functions of the
// model and the time axis, shared by the drawing and by the tests.
//
// A frame must not touch every event of a million-event trace. Each level of
// a row is sorted, so the first visible event is a binary search away; when
// zoomed out, a run of events narrower than `min_px` becomes one merged box
// and the next event past it is found by binary search too. The cost is about
// (boxes drawn) x log(events), whatever the trace's size.
#pragma once

#include <cstdint>
#include <vector>

#include "timeline.hpp"
#include "trace_model.hpp"

namespace distlab::viz {

// Narrower than this, an event is merged with its neighbours.
inline constexpr float kMergePx = 2.0f;
// Zoomed out, at most one send->recv arrow per this many pixels (of where
// it starts) between one pair of rows: more is a white blur, and each arrow
// costs a software rasterizer about as much as a thousand pixels of boxes.
inline constexpr float kArrowSpacingPx = 16.0f;

// One box on screen: a single event (count 1) or `count` consecutive events
// of one level merged because each is too narrow to see (event = the first).
struct BoxSpan {
  float x0 = 0.0f;
  float x1 = 0.0f;
  uint32_t event = 0;
  uint32_t count = 1;
};

// The boxes of `track` that intersect the axis' time range, left to right.
// The axis counts seconds from `origin_us`.
void layout_track(const Track& track, int64_t origin_us, const TimeAxis& axis, float min_px,
                  std::vector<BoxSpan>& out);

// The arrows of `bundle` that cross the axis' time range and join boxes one
// can see: an arrow whose send and recv are both narrower than kMergePx
// (drawn inside merged boxes) is left out. Of the arrows whose left ends fall
// within `spacing_px` of each other only the first is looked at: zoomed out,
// the cost is (view width / spacing_px) binary searches per bundle.
void layout_flows(const TraceModel& model, const FlowBundle& bundle, const TimeAxis& axis, float spacing_px,
                  std::vector<FlowLink>& out);

}  // namespace distlab::viz
