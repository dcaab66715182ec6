// The Collectives panel: broadcast, reduce, all-reduce and all-to-all
// animated from the library's plans, timed by its alpha-beta cost model.
//
// Up to three algorithms side by side, each as a scene (ranks on a circle,
// the current step's transfers as arrows whose packet moves as the step
// progresses, each rank's chunks filling up as contributions arrive; for
// all-to-all each rank's input and output blocks) above a timeline of the
// predicted schedule (one row per rank). One time cursor drives every scene
// and every timeline: play, pause, step, scrub, or click a timeline. A table
// compares steps, bytes per rank and predicted time.
#pragma once

#include <string>
#include <vector>

#include "collective_scene.hpp"
#include "options.hpp"
#include "timeline.hpp"

namespace distlab::viz {

// The one time cursor of a panel.
struct TimeCursor {
  double time_s = 0.0;
  bool playing = false;
  double run_wall_s = 10.0;  // playing, the longest algorithm takes this long on the wall clock

  // Moves on by `dt_wall` seconds of wall time; stops at `end_s`.
  void advance(double dt_wall, double end_s);
};

// What the last frame drew where, for the tests.
struct CollectivesFrameLayout {
  struct Column {
    ImVec2 scene_min, scene_max;
    SceneLayout scene;
    TimeAxis axis;
    std::vector<float> row_tops;
  };
  std::vector<Column> columns;
};

inline constexpr int kMaxSideBySide = 3;
inline constexpr float kPlanRowHeight = 20.0f;  // at scale 1 (--scale multiplies it)

class CollectivesPanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  // Throws std::invalid_argument for an unknown collective or algorithm, an
  // algorithm that does not implement the collective, or more than three.
  explicit CollectivesPanel(const Options& options);

  void draw();

  // Cursor control (also the buttons).
  void set_time(double t);
  void set_step(int k);  // the middle of step k of the first algorithm
  void step_forward();   // to the next step boundary of any algorithm
  void step_back();
  void toggle_play();
  double end_s() const;  // when the slowest algorithm finishes

  const CollectiveSetup& setup() const { return setup_; }
  const std::vector<AlgorithmRun>& runs() const { return runs_; }
  const TimeCursor& cursor() const { return cursor_; }
  const CollectivesFrameLayout& last_layout() const { return layout_; }

 private:
  void rebuild();
  void draw_controls();
  void draw_column(size_t index, ImVec2 size);
  void draw_scene(const AlgorithmRun& run, ImVec2 size, CollectivesFrameLayout::Column& out);
  void draw_summary();
  std::vector<double> boundaries() const;

  CollectiveSetup setup_;
  std::vector<collectives::Algorithm> algorithms_;
  std::vector<AlgorithmRun> runs_;
  TimeCursor cursor_;
  TimelineView view_;
  CollectivesFrameLayout layout_;
  std::string error_;
  float scale_ = 1.0f;
};

}  // namespace distlab::viz
