// The Trace panel: Chrome-trace files written by any lesson, or events
// streamed live from running ranks, as one timeline row per rank and lane.
//
// Zoom with the mouse wheel (at the mouse), pan by dragging, shift+wheel
// scrolls the rows. Hovering a box shows the event; clicking selects it and
// puts the time cursor there. Arrows go from each send to its recv: all of
// them, only the selected event's, or none. Runs of events too narrow to
// see are merged into grey boxes (trace_layout.hpp). Statistics per lane
// below.
//
// Under the rows, when the trace has memory counter samples
// (memory_model.hpp), a memory track: per rank, the total of its latest
// sample as a step area over time, on the rows' time axis (it zooms and
// pans with them), all ranks to one scale.
//
// With flight-recorder files (flight_overlay.hpp), each rank gets a row of
// its last communication operations under its trace rows, the diagnosis'
// finding is marked where the ranks part ways, and a banner says why; with
// no trace at all the flight rows alone make the timeline.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "flight_overlay.hpp"
#include "live_feed.hpp"
#include "memory_model.hpp"
#include "timeline.hpp"
#include "trace_layout.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"

namespace distlab::viz {

enum class ArrowMode { kAll, kSelected, kNone };
ArrowMode parse_arrow_mode(const std::string& name);

// Row geometry at scale 1 (--scale multiplies it): each stacking level is a
// band of kLevelHeight pixels; a row shows at most kMaxLevelsShown bands
// (deeper levels draw in the last one).
inline constexpr float kLevelHeight = 20.0f;
inline constexpr float kRowPadding = 3.0f;
inline constexpr int kMaxLevelsShown = 6;
inline constexpr float kMergedHalfHeight = 3.0f;  // merged runs: a bar 6 px tall in the band's middle

// The memory track: one row per rank, kMemoryTrackRowHeight pixels at scale 1;
// a total of 0 sits kMemoryTrackPad above the row's bottom, the largest total of
// any rank kMemoryTrackPad below its top.
inline constexpr float kMemoryTrackRowHeight = 40.0f;
inline constexpr float kMemoryTrackPad = 4.0f;
inline constexpr float kMemoryTrackGap = 6.0f;  // between the rows above and the track
inline constexpr Color kMemoryTrackFillColor = rgb(36, 104, 142);
inline constexpr Color kMemoryTrackLineColor = rgb(96, 200, 250);

// What the last frame drew where: for tests that probe rendered pixels and
// for hit-testing.
struct TraceFrameLayout {
  bool drawn = false;
  TimeAxis axis;  // seconds after model.origin_us()
  ImVec2 area_min, area_max;
  std::vector<float> row_tops;  // screen pixels
  size_t boxes = 0;             // boxes drawn (after merging)
  size_t merged_boxes = 0;
  size_t arrows = 0;
  float scale = 1.0f;
  // The memory track, when drawn: its axis (the same as `axis`), one row
  // per rank of memory_ranks, and the total drawn at full height.
  bool memory_drawn = false;
  TimeAxis memory_axis;
  std::vector<int> memory_ranks;
  std::vector<float> memory_row_tops;
  float memory_row_height = 0.0f;
  int64_t memory_full_bytes = 0;

  // Where a memory total is drawn in the track row whose top is `row_top`.
  float memory_y(float row_top, int64_t bytes) const;

  // The vertical centre of an event's band.
  float band_center(float row_top, uint32_t level) const;
};

class TracePanel {
 public:
  // Replaces what is shown by these files (one per rank, or one for all).
  // Throws trace::TraceFormatError naming the file when one cannot be read;
  // warnings (a truncated file) are kept and shown.
  void open_files(const std::vector<std::string>& paths);
  // Files already read (open_traces, or a TraceDownload in the page).
  void open(OpenedTraces opened);
  // Shows these events (tests, the benchmark).
  void set_events(const std::vector<trace::Event>& events);
  // Reads flight-recorder files (files, or directories of flight.rank*.json)
  // and diagnoses them; unreadable ones become "refused ..." messages, as
  // distlab-trace why prints them. Never throws.
  void open_flight(const std::vector<std::string>& paths);
  // Opens the flight.rank*.json files lying beside these trace files, if
  // any, and says so in messages(). Returns whether there were some.
  bool open_flight_beside(const std::vector<std::string>& trace_paths);
  // Shows the window around the flight finding's marker, when there is one.
  void focus_flight();
  // Starts the live listener; throws std::runtime_error when it cannot.
  void listen(int port, const std::string& bind_host);
  void set_view_ms(double begin_ms, double end_ms);
  void set_arrow_mode(ArrowMode mode) { arrows_ = mode; }
  void select(std::optional<uint32_t> event) { selected_ = event; }
  // Row heights and the label column grow with the text (--scale).
  void set_scale(float scale) { scale_ = scale; }

  // Takes in what the live listener received; once per frame, whether the
  // panel is shown or not (App::frame does it), so nothing piles up.
  void update();
  // One frame of the panel in the current ImGui window.
  void draw();

  const TraceModel& model() const { return model_; }
  const FlightOverlay& flight() const { return flight_; }
  // Time 0 of the axis: the trace's first event, or the first flight
  // operation when there is no trace.
  int64_t origin_us() const;
  // The memory counter samples among the model's (the Memory panel shows them too).
  const MemoryModel& memory() const { return memory_; }
  const TraceFrameLayout& last_layout() const { return layout_; }
  const std::vector<std::string>& messages() const { return messages_; }
  const LiveFeed* live() const { return live_.get(); }

 private:
  class Row;
  class MemoryRow;
  struct Hover {
    uint32_t event = 0;
    uint32_t count = 0;  // 0: nothing hovered
    float x0 = 0.0f;
    float x1 = 0.0f;
  };

  void draw_toolbar();
  void draw_timeline(ImVec2 size);
  void draw_memory_track(ImVec2 size);
  void draw_memory_tooltip(int rank, const MemoryPoint& point) const;
  // Takes in the model's counter samples it has not seen yet.
  void sync_memory();
  void draw_arrows(const TimelineContext& ctx);
  void draw_tooltip(const Hover& hover) const;
  void draw_stats();
  void fit_all();
  ImVec2 event_anchor(uint32_t event, bool at_end) const;
  Color color_of(uint32_t category);

  TraceModel model_;
  FlightOverlay flight_;
  std::map<int, trace::ClockOffset> clock_offsets_;  // from the trace files, applied to the flight files too
  MemoryModel memory_;
  size_t memory_seen_ = 0;  // model_'s counter samples given to memory_
  TimelineView memory_view_;  // the track's: times copied from view_ (its scroll is its own)
  std::optional<std::pair<int, MemoryPoint>> memory_hover_;
  std::unique_ptr<LiveFeed> live_;
  std::chrono::steady_clock::time_point last_finalize_{};
  bool live_pending_ = false;
  size_t live_errors_seen_ = 0;
  std::set<int> live_offsets_seen_;  // ranks whose clock offset was announced in messages_
  TimelineView view_;
  bool fitted_ = false;
  bool follow_live_ = true;
  bool show_stats_ = true;
  ArrowMode arrows_ = ArrowMode::kAll;
  float scale_ = 1.0f;
  std::optional<uint32_t> selected_;
  std::optional<double> cursor_s_;
  std::vector<std::string> messages_;
  std::string path_input_;
  int port_input_ = 29400;
  std::string bind_input_ = "127.0.0.1";
  TraceFrameLayout layout_;
  Hover hover_;
  std::vector<BoxSpan> boxes_;        // scratch, reused every frame
  std::vector<FlowLink> links_;
  std::unordered_map<uint32_t, Color> category_colors_;
};

}  // namespace distlab::viz
