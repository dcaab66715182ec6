// The Experts panel: how many tokens each expert took, step by step, and how
// many its capacity dropped (experts_model.hpp reads them from the trace:
// lesson 16's runs, the capstone's layers with --experts).
//
//   +-------------------------------------------------------------+
//   | [layer 0 v]  step [----o------] 7 of 24   capacity 18        |
//   |   ##                                                        |
//   |   ##  xx                                                    |
//   |   ##  ##  ##                                                |
//   |   ##  ##  ##  ##          ## kept   xx dropped              |
//   |   e0  e1  e2  e3                                            |
//   |  kept 640 of 700 assignments, dropped 60 (8.6 %)            |
//   +-------------------------------------------------------------+
//
// One bar per expert: what it kept (the series' colour) and, stacked on
// top, what it dropped (red). Every step of a label is drawn to one scale
// (its largest bar), so a router that learns to balance shows as bars
// levelling out while the red goes; a dashed line marks the even share.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "colors.hpp"
#include "experts_model.hpp"
#include "options.hpp"

namespace distlab::viz {

inline constexpr Color kExpertKeptColor = rgb(66, 133, 244);
inline constexpr Color kExpertDroppedColor = rgb(229, 57, 53);

// What the last frame drew where, for the tests.
struct ExpertBar {
  int expert = 0;
  int64_t kept = 0, dropped = 0;
  float x0 = 0, x1 = 0;
  float kept_top = 0;     // the kept part: from the chart's bottom up to here
  float dropped_top = 0;  // the dropped part: from kept_top up to here (equal when nothing dropped)
};

struct ExpertsFrameLayout {
  bool drawn = false;
  std::string label;
  int step = 0;
  float chart_top = 0, chart_bottom = 0;  // y of the scale's largest value, and of 0
  int64_t full = 0;                       // the scale's largest value
  std::vector<ExpertBar> bars;
};

class ExpertsPanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  explicit ExpertsPanel(const Options& options) : scale_(options.scale) {}

  // Reads the experts counters of `events`; false when there are none.
  bool set_trace(const std::vector<trace::Event>& events);
  const ExpertsModel& model() const { return model_; }
  // Which label ("" keeps the one shown) and step (0-based) the next frame
  // shows, the step clamped to what there is. False for a label the trace
  // does not hold.
  bool select(const std::string& label, int step);

  void draw();
  const ExpertsFrameLayout& last_layout() const { return layout_; }

 private:
  void draw_chart(const ExpertStep& step, int64_t full, ImVec2 size);

  float scale_ = 1.0f;
  ExpertsModel model_;
  int label_ = 0, step_ = 0;
  ExpertsFrameLayout layout_;
};

}  // namespace distlab::viz
