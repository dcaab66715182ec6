// The Pipeline panel: pipeline schedules timed by the library's simulator,
// and a real run's trace drawn under the simulation of the same schedule.
//
// Compare: one to four schedules side by side (GPipe, 1F1B, Interleaved
// 1F1B, LoopedBFS, ZB-H1, Interleaved ZB, ZBV, DualPipeV) for the same p, m,
// v and costs, on one time axis.
// Each column has one row per rank, a box per compute action coloured by
// microbatch (F bright, B dark, I and W lighter) and labelled "F3", idle
// time as gaps; under it each stage's activations held over time, with the
// peak. Under the columns, two small plots re-simulate the same setup for
// every m from 1 to 32: bubble against m and peak activations against m, a
// line per schedule in its colour (the column titles' colour), the current
// m marked (pipeline_plots.hpp says what they show). A table compares
// makespan, bubble (against (p-1)/(m+p-1)) and peak activations.
//
// Measured: a trace of the pipeline executor (lanes "stage s") is measured
// (pipeline::measure), the same schedule is simulated with the measured
// per-stage costs, and both are drawn on one axis, the simulation above the
// measurement: where they differ is communication and noise the simulator
// does not model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "pipeline_plots.hpp"
#include "pipeline_scene.hpp"
#include "timeline.hpp"

namespace distlab::viz {

inline constexpr int kMaxSchedulesSideBySide = 4;
inline constexpr float kPipelineRowHeight = 22.0f;  // at scale 1
inline constexpr float kMemoryRowHeight = 26.0f;
inline constexpr Color kMemoryColor = rgb(121, 134, 203);
inline constexpr Color kCompoundColor = rgb(250, 250, 250);  // the frame of an OVERLAP_F_B's two halves

// What the last frame drew where, for the tests.
struct PipelineFrameLayout {
  struct Column {
    TimeAxis axis;
    std::vector<float> row_tops;     // one per rank (measured view: simulated ranks, then measured ranks)
    float row_height = 0.0f;
    TimeAxis memory_axis;
    std::vector<float> memory_row_tops;  // one per stage
    float memory_row_height = 0.0f;
    int memory_scale = 1;                // a full row is this many microbatches
  };
  bool measured_view = false;
  std::vector<Column> columns;
  std::vector<SweepPlotLayout> plots;  // bubble, then peak activations (compare view only)
};

class PipelinePanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  // Throws std::invalid_argument for an unknown schedule or more than four,
  // pipeline::ScheduleError for a (p, m, v) the schedules cannot take.
  explicit PipelinePanel(const Options& options);

  // Shows the pipeline run found in these trace events, measured against
  // its simulation. Returns false (and keeps what was shown) when they hold
  // none; throws pipeline::ScheduleError when they describe no schedule.
  bool set_trace(const std::vector<trace::Event>& events);

  void draw();

  const std::vector<PipelineRun>& runs() const { return runs_; }
  const std::optional<MeasuredPipeline>& measured() const { return measured_; }
  bool showing_measured() const { return show_measured_ && measured_.has_value(); }
  const PipelineFrameLayout& last_layout() const { return layout_; }
  // The plots' sweep over m, cached by setup (see SweepCache).
  const SweepCache& sweep() const { return sweep_; }

 private:
  void rebuild();
  void draw_controls();
  void draw_column(size_t index, ImVec2 size);
  void draw_measured(ImVec2 size);
  void draw_summary();
  void draw_plots(ImVec2 size);
  PipelineFrameLayout::Column draw_memory(const char* id, const std::vector<const PipelineRun*>& runs, ImVec2 size,
                                          int scale_max);

  PipelineSetup setup_;
  std::vector<pipeline::ScheduleKind> kinds_;
  std::vector<PipelineRun> runs_;
  SweepCache sweep_;
  std::optional<MeasuredPipeline> measured_;
  bool show_measured_ = false;
  TimelineView view_;
  TimelineView measured_view_;
  PipelineFrameLayout layout_;
  std::string error_;
  float scale_ = 1.0f;
};

// "gpipe,1f1b" -> kinds; every kind when empty. Throws std::invalid_argument.
std::vector<pipeline::ScheduleKind> parse_schedule_list(const std::string& text);

}  // namespace distlab::viz
