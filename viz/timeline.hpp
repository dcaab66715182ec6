// The shared timeline: rows of boxes against time, zoomed and panned.
//
// Every panel that shows time (trace, collectives, and later the pipeline
// schedule and DDP buckets) draws through this file, so they share one
// time-to-pixel mapping (TimeAxis::x_of), one way to zoom and pan, one axis
// and one cursor. A panel supplies rows (TimelineRow: label(), height(),
// draw(ctx)) and draws overlays such as arrows with the context
// begin_timeline returns.
//
//   +--------+-------------------------------------------+
//   |        | 0 s      1 ms      2 ms      3 ms   (axis)|
//   +--------+-------------------------------------------+
//   | rank 0 | [box]  [box]       [box]                  |  row_tops[0]
//   | rank 1 |    [box]    [box]                         |  row_tops[1]
//   +--------+-------------------------------------------+
//    labels   track area: x = axis.x_of(t)
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "colors.hpp"

namespace distlab::viz {

// Time (seconds) to horizontal pixels and back: the only place that maps one
// to the other. Layout code (no ImGui context needed) and drawing both use it.
struct TimeAxis {
  double begin_s = 0.0;  // time at x0
  double end_s = 1.0;    // time at x1
  float x0 = 0.0f;
  float x1 = 1.0f;

  float x_of(double t) const { return x0 + static_cast<float>((t - begin_s) / (end_s - begin_s) * (x1 - x0)); }
  double time_at(float x) const { return begin_s + (x - x0) / static_cast<double>(x1 - x0) * (end_s - begin_s); }
  double seconds_per_pixel() const { return (end_s - begin_s) / (x1 - x0); }
};

// The zoom and pan of one timeline; part of a panel's state.
struct TimelineView {
  double begin_s = 0.0;
  double end_s = 1.0;
  float scroll_y = 0.0f;  // pixels the rows are scrolled up by

  // Shows [begin, end] with a small margin on both sides.
  void fit(double begin, double end);
  // factor < 1 zooms in; the time `anchor_s` stays under the same pixel.
  void zoom_at(double anchor_s, double factor);
  void pan(double delta_s);
};

struct TimelineStyle {
  float label_width = 140.0f;
  float axis_height = 22.0f;
  // Times printed over the axis; off for a strip that sits under another
  // timeline on the same axis (its grid lines stay).
  bool axis_labels = true;
};

// One frame of one timeline: what rows and overlays draw with.
struct TimelineContext {
  ImDrawList* draw = nullptr;
  TimeAxis axis;
  ImVec2 area_min, area_max;  // the track area, screen pixels
  float row_top = 0.0f;       // the row being drawn (set before each draw())
  float row_bottom = 0.0f;
  std::vector<float> row_tops;  // every row's top edge, screen pixels (scrolled)
  std::vector<float> row_heights;
  ImVec2 mouse;
  bool hovered = false;  // the mouse is over the track area
  int hovered_row = -1;
  bool clicked = false;  // a click (press and release without dragging) this frame
  int clicked_row = -1;
  double clicked_time_s = 0.0;

  bool row_visible(int row) const {
    return row_tops[row] < area_max.y && row_tops[row] + row_heights[row] > area_min.y;
  }
};

class TimelineRow {
 public:
  virtual ~TimelineRow() = default;
  virtual std::string label() const = 0;
  virtual float height() const = 0;
  // Draws between ctx.row_top and ctx.row_bottom, clipped to the track area.
  virtual void draw(const TimelineContext& ctx) const = 0;
  // The label cell's fill; 0: the usual (every other row slightly lighter).
  // A row that must stand out (the rank a diagnosis blames) returns its colour.
  virtual Color label_background() const { return 0; }
};

// Where rows go: tops relative to the first row, stacked with no gap.
std::vector<float> stack_rows(const std::vector<const TimelineRow*>& rows);

// Draws the axis, labels and rows in a `size` region at the ImGui cursor and
// handles input: mouse wheel zooms at the mouse, dragging pans (and scrolls
// the rows), a click reports its row and time. Leaves the track area as the
// clip rect so overlays can be drawn; end_timeline restores it.
TimelineContext begin_timeline(const char* id, TimelineView& view, const std::vector<const TimelineRow*>& rows,
                               ImVec2 size, const TimelineStyle& style = {});
void end_timeline(const TimelineContext& ctx);

// A box from x0 to x1 (at least one pixel wide) with a label when it fits.
void draw_box(const TimelineContext& ctx, float x0, float x1, float y0, float y1, Color fill, const char* label);
// A straight arrow with a filled head at `to`.
void draw_arrow(ImDrawList* draw, ImVec2 from, ImVec2 to, Color color, float thickness, float head);
// The shared time cursor: a vertical line through every row.
void draw_time_cursor(const TimelineContext& ctx, double t, Color color = kCursorColor);

// "35 s", "1.50 ms", "12 us": what the axis and tooltips print.
std::string format_duration(double seconds);
// "5 MB", "1.25 MB", "512 B" (decimal units, as the slides count).
std::string format_bytes(double bytes);

}  // namespace distlab::viz
