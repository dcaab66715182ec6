// The DDP panel: how DDP packs gradients into buckets and how their
// all-reduces hide behind backward.
//
// - The bucket plan as a strip of parameters (widths to scale) grouped into
//   buckets, before the rebuild (reverse registration order) and after it
//   (the order gradients became ready): ddp::plan_buckets on a preset
//   model, a list of layer sizes, or the plans a trace recorded.
// - One training step per plan on one time axis: forward, backward making
//   gradients ready one after another (coloured by bucket), each bucket's
//   all-reduce (the alpha-beta model of a ring) starting when its last
//   gradient is ready and the previous bucket is done, the optimizer
//   waiting for the last one; the overlap fraction (ddp::overlap_of_step).
//   Under no_sync, k micro-steps of forward and backward come first.
// - A bucket-size slider with the step time the model predicts, and that
//   time for every bucket size as a curve.
// - With a trace of a DDP run, its measured step on its own axis below.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ddp_scene.hpp"
#include "options.hpp"
#include "timeline.hpp"

namespace distlab::viz {

inline constexpr float kDdpRowHeight = 22.0f;  // at scale 1
inline constexpr float kStripHeight = 26.0f;
inline constexpr float kBucketGap = 4.0f;      // pixels between buckets in a strip
inline constexpr Color kWaitColor = rgb(84, 88, 102);

// Colour of bucket b: its gradients and its all-reduce.
inline Color bucket_color(int bucket) { return chunk_color(bucket % 16); }

// Where a strip puts each parameter: x from 0 to `width`, one gap of
// kBucketGap between buckets, widths proportional to bytes (at least 1 px).
struct StripCell {
  int param = 0;
  int bucket = 0;
  float x0 = 0.0f;
  float x1 = 0.0f;
};
std::vector<StripCell> layout_strip(const ddp::BucketPlan& plan, float width);

// What the last frame drew where, for the tests.
struct DdpFrameLayout {
  struct Strip {
    ImVec2 min;  // the strip's top-left corner; cells are relative to min.x
    float height = 0.0f;
    std::vector<StripCell> cells;
  };
  Strip before, after;
  TimeAxis axis;                 // the simulated steps
  std::vector<float> row_tops;   // first plan: compute, all-reduce; rebuilt plan: compute, all-reduce
  float row_height = 0.0f;
  bool measured_drawn = false;
  TimeAxis measured_axis;
  std::vector<float> measured_row_tops;  // compute, all-reduce
};

class DdpPanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  // Throws std::invalid_argument for an unknown model or a bad --layers.
  explicit DdpPanel(const Options& options);

  // Shows the bucket plans and the last step recorded in these events, of
  // the first DDP rank 0 built. Returns false (and keeps what was shown)
  // when they hold no bucket plan.
  bool set_trace(const std::vector<trace::Event>& events);
  // Shows DDP number `instance` (0-based, clamped) of the trace instead.
  void show_instance(int instance);

  void draw();

  // The plans and steps shown, for the tests.
  const ddp::BucketPlan& before() const { return before_; }
  const ddp::BucketPlan& after() const { return after_; }
  const DdpStep& first_step() const { return first_step_; }
  const DdpStep& rebuilt_step() const { return rebuilt_step_; }
  const std::optional<MeasuredDdp>& measured() const { return measured_; }
  const DdpModel& model() const { return model_; }
  const DdpFrameLayout& last_layout() const { return layout_; }
  void set_bucket_mb(double mb);

 private:
  void show(MeasuredDdp measured);  // its plans and step, in place of what was shown
  void rebuild();
  void draw_controls();
  DdpFrameLayout::Strip draw_strip(const char* title, const ddp::BucketPlan& plan);
  void draw_steps(ImVec2 size);
  void draw_measured(ImVec2 size);
  void draw_summary();

  DdpModel model_;
  std::string preset_;
  DdpCosts costs_;
  double bucket_mb_ = 25.0;
  double first_bucket_mb_ = 1.0;
  bool plans_from_trace_ = false;  // showing the trace's own plans until a setting changes
  ddp::BucketPlan before_, after_;
  DdpStep first_step_, rebuilt_step_;
  std::vector<float> step_ms_by_cap_;  // the curve under the slider
  std::optional<MeasuredDdp> measured_;
  std::vector<trace::Event> trace_events_;  // what set_trace got, to show another DDP of it
  TimelineView view_;
  TimelineView measured_view_;
  DdpFrameLayout layout_;
  std::string error_;
  float scale_ = 1.0f;
};

}  // namespace distlab::viz
