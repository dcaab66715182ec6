// Flight-recorder files on the Trace panel (flight_model.hpp holds the
// data): what each rank was doing when the job went wrong, and where the
// ranks parted ways.
//
// - one row per rank, "rank R flight", under that rank's trace rows (or
//   alone, when there is no trace: what a user has after a hang without
//   tracing on): each operation a span from when the rank entered it to
//   when it ended, or to the dump while it had not; coloured by how it
//   ended, with a tick where the rank began to wait;
// - the marker: a line through every row where the waiting ranks entered
//   the finding's operation, a band from there to the culprits' operations
//   (a thinner line at them), and those operations outlined;
// - the culprit's rows: label cells (trace rows too) and its flight row's
//   background in kFlightCulpritRowColor;
// - a banner over the timeline: the diagnosis' summary and the finding's
//   text, as distlab-trace why prints it, with a button that zooms to the
//   marker; hovering a span shows the operation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "colors.hpp"
#include "flight_model.hpp"
#include "timeline.hpp"

namespace distlab::viz {

inline constexpr Color kFlightDoneColor = rgb(74, 112, 142);      // completed
inline constexpr Color kFlightOpenColor = rgb(232, 164, 48);      // entered or started, not ended at the dump
inline constexpr Color kFlightFailedColor = rgb(204, 64, 64);     // failed or timed out
inline constexpr Color kFlightStartTickColor = rgb(24, 26, 32);   // where the rank began to wait
inline constexpr Color kFlightMarkerColor = rgb(255, 72, 204);    // where the ranks part ways
inline constexpr Color kFlightCulpritLineColor = rgb(255, 150, 226);
inline constexpr Color kFlightCulpritRowColor = rgb(96, 30, 40);  // the blamed rank's rows
inline constexpr Color kFlightBannerColor = rgb(52, 30, 44);
inline constexpr float kFlightMarkerWidth = 2.0f;

// The order of a timeline's rows when flight rows join the trace's: each
// rank's trace rows (in their order), then its flight row; ranks ascending.
struct RowSlot {
  bool flight = false;  // a flight row (index into flight_ranks), or a trace row
  uint32_t index = 0;
};
std::vector<RowSlot> interleave_rows(const std::vector<int>& trace_row_ranks, const std::vector<int>& flight_ranks);

// What the last frame drew where (tests probe these pixels).
struct FlightFrameLayout {
  std::vector<int> row_ranks;   // flight rows drawn, top to bottom
  std::vector<float> row_tops;  // their tops, screen pixels
  float row_height = 0.0f;
  size_t boxes = 0;             // spans drawn (a run of sub-pixel ones is one)
  bool marker_drawn = false;
  float marker_x = 0.0f;        // the line at marker().at_us
  bool culprit_drawn = false;
  float culprit_x = 0.0f;       // the line at marker().culprit_us
  float band_x0 = 0.0f, band_x1 = 0.0f;
  bool banner_drawn = false;
  std::string banner_text;      // the finding's text, as drawn
  ImVec2 banner_min, banner_max;

  // Top of `rank`'s flight row; nullopt when it was not drawn.
  std::optional<float> row_top_of(int rank) const;
};

class FlightOverlay {
 public:
  FlightModel& model() { return model_; }
  const FlightModel& model() const { return model_; }
  bool active() const { return model_.loaded(); }

  // One rank's flight row, drawn with time 0 at `origin_us`.
  class Row : public TimelineRow {
   public:
    Row(const FlightOverlay& overlay, int rank, int64_t origin_us, float scale)
        : overlay_(overlay), rank_(rank), origin_us_(origin_us), scale_(scale) {}
    std::string label() const override;
    float height() const override;
    void draw(const TimelineContext& ctx) const override;
    Color label_background() const override;

   private:
    const FlightOverlay& overlay_;
    int rank_;
    int64_t origin_us_;
    float scale_;
  };

  // Before the timeline is drawn: forgets the last frame's layout and hover.
  void begin_frame();
  // The label fill of any row of `rank` (0: the usual).
  Color label_background(int rank) const;
  // Over the rows, after they are drawn.
  void draw_marker(const TimelineContext& ctx, int64_t origin_us);
  // The banner at the ImGui cursor, full width. Returns true when its
  // button asked to zoom to the marker.
  bool draw_banner(float scale);
  // The hovered span's operation, if any; after the timeline.
  void draw_tooltip(int64_t origin_us) const;

  const FlightFrameLayout& last_layout() const { return layout_; }
  // The operation under the mouse in the last frame (its tooltip is shown).
  std::optional<FlightOpRef> hovered() const { return hover_; }

 private:
  FlightModel model_;
  mutable FlightFrameLayout layout_;
  mutable std::optional<FlightOpRef> hover_;
};

}  // namespace distlab::viz
