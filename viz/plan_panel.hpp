// The Plan panel: distlab-plan's ranked layouts (a record of
// `distlab-plan --record FILE`, plan_model.hpp), each measured layout's
// predicted step time against the measured one, and a layout's predicted
// memory per pipeline rank.
//
//   the cpu preset on 4 ranks ...; profile vm, 2026-11-30 (2 cores, cpu); 412 layouts accepted, ...
//   3 layouts ran: step time error mean 30.0%, worst 42.0%; Spearman 1.00; regret 0.0% ...
//   +------------------------------+  +------------------------------------+
//   | meas ms          /           |  | #2 2x2x1x1 1f1b m4 ddp none fp32   |
//   |  200 -  17 o   /             |  | [] parameters [] gradients ...     |
//   |  100 -      / o 2            |  |  ##  ##                            |
//   |       1 o /                  |  |  ##  ##     job: predicted ======   |
//   |     0 +/------------ pred ms |  |  r0  r1          metered   ======== |
//   | failed: #3 ...: out of memory|  |                                    |
//   | # layout    pred  meas error |  |                                    |
//   +------------------------------+  +------------------------------------+
//
// Left: a point per layout that ran at (predicted, measured), one scale on
// both axes so the diagonal y = x (a perfect prediction) is at 45 degrees:
// a point above it ran slower than predicted. Each point is labelled with
// its place; the layouts that failed are listed under the plot with why.
// Under them every layout of the record in a table (place, name, predicted
// and measured ms, error). Clicking a point or a row selects a layout.
// Right: the selected layout's predicted memory, a bar per pipeline rank
// stacked by category (kPlanCategories, bottom first), every layout's bars
// to one scale; where it ran, the job's metered bytes beside its predicted
// ones.
#pragma once

#include <imgui.h>

#include <array>
#include <string>
#include <vector>

#include "colors.hpp"
#include "options.hpp"
#include "plan_model.hpp"

namespace distlab::viz {

// Category c of kPlanCategories in the bars and the legend.
Color plan_category_color(int category);
inline constexpr Color kPlanPointColor = rgb(90, 200, 250);      // a layout that ran
inline constexpr Color kPlanDiagonalColor = rgb(128, 132, 144);  // y = x
inline constexpr Color kPlanFailedColor = rgb(239, 83, 80);      // the failed layouts' text
inline constexpr Color kPlanJobPredictedColor = rgb(144, 164, 174);
inline constexpr Color kPlanJobMeteredColor = rgb(255, 241, 118);

// What the last frame drew where, for the tests and the clicks.
struct PlanPoint {
  int layout = 0;  // index into the record's layouts
  ImVec2 at;
};
struct PlanBar {
  int pipeline_rank = 0;
  float x0 = 0.0f, x1 = 0.0f;
  // Category c's segment: from segment_bottom[c] up to segment_top[c] (screen
  // y grows downwards; equal when the category is 0).
  std::array<float, kPlanCategoryCount> segment_bottom{}, segment_top{};
};
struct PlanRow {
  int layout = 0;   // index into the record's layouts
  ImVec2 min, max;  // the row of the table, every column
};
struct PlanFrameLayout {
  bool drawn = false;  // false: no plan, the explanation instead
  // The scatter: lo_ms .. hi_ms on both axes, across from plot_left to
  // plot_right and up from plot_bottom to plot_top (a square).
  bool scatter_drawn = false;
  float plot_left = 0.0f, plot_right = 0.0f, plot_top = 0.0f, plot_bottom = 0.0f;
  double lo_ms = 0.0, hi_ms = 1.0;
  float point_radius = 0.0f;
  std::vector<PlanPoint> points;
  int selected = -1;          // index into the record's layouts
  std::vector<PlanRow> rows;  // the table's rows shown (scrolled into view)
  // The selected layout's bars: 0 bytes at chart_bottom, full_bytes at chart_top.
  float chart_top = 0.0f, chart_bottom = 0.0f;
  int64_t full_bytes = 0;
  std::vector<PlanBar> bars;
  // The job's bytes, predicted and metered, as bars from job_left to the
  // right (job_right is full_job_bytes); y is each bar's middle.
  bool job_drawn = false;
  float job_left = 0.0f, job_right = 0.0f, job_predicted_y = 0.0f, job_metered_y = 0.0f;
  int64_t full_job_bytes = 0;
  std::string header, scores;  // the two lines at the top
};

class PlanPanel {
 public:
  explicit PlanPanel(const Options& options) : scale_(options.scale) {}
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }

  // Reads a record (read_plan_file); throws PlanFormatError and keeps what
  // it showed. Selects the first layout.
  void open(const std::string& path);
  void set_plan(PlanRecord plan, const std::string& path = "");
  bool opened() const { return opened_; }
  const PlanRecord& plan() const { return plan_; }
  const std::string& path() const { return path_; }

  // The layout shown on the right: an index into plan().layouts, clamped.
  void select(int layout);
  int selected() const { return selected_; }

  void draw();
  const PlanFrameLayout& last_layout() const { return layout_; }

 private:
  void draw_header();
  void draw_scatter(ImVec2 size);
  void draw_failed();
  void draw_table(ImVec2 size);
  void draw_memory(ImVec2 size);
  void draw_job(const PlanLayout& layout, float width);
  void draw_tooltip(const PlanLayout& layout) const;

  float scale_ = 1.0f;
  PlanRecord plan_;
  std::string path_;
  bool opened_ = false;
  int selected_ = -1;
  int hovered_ = -1;
  PlanFrameLayout layout_;
};

}  // namespace distlab::viz
