// The Wire panel: the same-host transport's ring in shared memory, sample
// by sample, as the trace's "shm ring S->D" counters say (wire_model.hpp).
//
//   [0->1: rank 0 writes, rank 1 reads v]  [< sample] [sample >] [----o-----]
//          ____
//       .'  ## '.  head        ## in flight: written by rank 0, not yet read
//      | tail ##  |            .. free
//       '.      .'
//          ''''
//   sample 7 of 40 (rank 0, t = 1,234 us): head 524,288 B, tail 262,144 B, 262,144 B in flight (12.5% of the ring), ...
//   bytes |      ___|      head (rank 0 writes)
//         |  ___|   |      tail (rank 1 reads)
//         +--------------- time
//
// The ring is an annulus, 12 o'clock its byte 0, bytes clockwise: the arc
// from tail to head (what is in flight) in the sending rank's colour, the
// rest dim; ticks every capacity / 8 (the chunk the library copies at once).
// Under it head and tail over the whole run as step lines, the current
// sample marked by the cursor. A step control (slider, buttons, arrow keys,
// a click on the plot) chooses the sample.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "colors.hpp"
#include "options.hpp"
#include "wire_model.hpp"

namespace distlab::viz {

inline constexpr Color kWireFreeColor = rgb(50, 54, 66);  // the part of the ring nothing is in

// What the last frame drew where, for the tests.
struct WireFrameLayout {
  bool drawn = false;  // false: no ring samples, the explanation instead
  int ring = -1;       // index into the model's rings
  int sample = -1;     // 0-based, into that ring's samples
  WireView view;
  std::string caption;  // "sample i of n (rank R, ...)"
  // The annulus: a turn t of the ring is at angle 2 pi t clockwise from 12 o'clock.
  ImVec2 centre;
  float inner_radius = 0.0f, outer_radius = 0.0f;
  Color occupied_color = 0;  // the sender's colour
  // The plot: time t0_us at plot_left to t1_us at plot_right, bytes `low`
  // at plot_bottom to `high` at plot_top.
  float plot_left = 0.0f, plot_right = 0.0f, plot_top = 0.0f, plot_bottom = 0.0f;
  int64_t t0_us = 0, t1_us = 0, low = 0, high = 0;
  Color head_color = 0, tail_color = 0;  // the two step lines: the sender's colour, the receiver's
};

class WirePanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  explicit WirePanel(const Options& options) : scale_(options.scale) {}

  // Reads the ring counters of `events`; false when there are none.
  bool set_trace(const std::vector<trace::Event>& events);
  const WireModel& model() const { return model_; }

  // The controls, also for the tests and the command line. The ring as
  // WireModel::find finds it; false for one the trace does not hold. The
  // sample (0-based) is clamped to the ring's.
  bool select_ring(const RingId& id);
  void set_sample(int index);
  void step_forward();  // stays at the last
  void step_back();     // stays at the first
  int ring() const { return ring_; }
  int sample() const { return sample_; }
  int sample_count() const;  // of the ring shown; 0 without rings

  void draw();
  const WireFrameLayout& last_layout() const { return layout_; }

 private:
  void show_ring(int index);  // from its first sample
  void draw_controls();
  void draw_ring(const WireRing& ring, ImVec2 size);
  void draw_plot(const WireRing& ring, ImVec2 size);

  float scale_ = 1.0f;
  WireModel model_;
  int ring_ = 0, sample_ = 0;
  WireFrameLayout layout_;
};

}  // namespace distlab::viz
