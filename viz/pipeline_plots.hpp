// The Pipeline panel's two small plots under the schedules: for the setup
// above them (kinds, p, v, costs), every m from 1 to 32 simulated, one line
// per schedule in its colour (schedule_color), the current m marked by a
// vertical line in the cursor's yellow.
//
// - bubble against m: GPipe and 1F1B follow (p-1)/(m+p-1), drawn as a thin
//   grey line under them: the fill and drain cost p-1 slots whatever m is,
//   so more microbatches make them a smaller part of the step. Interleaved
//   1F1B shrinks the slots by v, ZB-H1 fills them with W.
// - peak activations against m, in microbatches of one rank's share of the
//   model: GPipe's grows as m (every forward before any backward), 1F1B's
//   stops at p (a backward after every forward once the pipe is full).
//   Small bubbles cost memory for GPipe and not for 1F1B.
//
// Where schedules coincide (GPipe's and 1F1B's bubbles) the later one in
// the panel's order is drawn on top.
#pragma once

#include <imgui.h>

#include <vector>

#include "pipeline_scene.hpp"

namespace distlab::viz {

enum class SweepQuantity { kBubble, kRankPeak };

double sweep_value(const SweepPoint& point, SweepQuantity quantity);

// Where a plot was drawn, for the tests: m runs from first_m at `left` to
// last_m at `right`, values from 0 at `bottom` to y_max at `top`.
struct SweepPlotLayout {
  SweepQuantity quantity = SweepQuantity::kBubble;
  float left = 0.0f, right = 1.0f, top = 0.0f, bottom = 1.0f;
  int first_m = kSweepFirstMicrobatches;
  int last_m = kSweepLastMicrobatches;
  double y_max = 1.0;
  float x_of(double m) const { return left + static_cast<float>((m - first_m) / double(last_m - first_m)) * (right - left); }
  float y_of(double value) const { return bottom - static_cast<float>(value / y_max) * (bottom - top); }
};

inline constexpr float kSweepPointHalf = 2.5f;   // a point's square, half its side, at scale 1
inline constexpr float kSweepMarkerWidth = 2.0f;  // the current m's line

// Draws one plot in a `size` region at the ImGui cursor: a title line with
// each schedule's value at `current_m`, the axes, the lines. `ranks` (p)
// gives the bubble plot its (p-1)/(m+p-1) line.
SweepPlotLayout draw_sweep_plot(const char* id, const std::vector<SweepSeries>& series, SweepQuantity quantity,
                                int current_m, int ranks, ImVec2 size, float scale);

}  // namespace distlab::viz
