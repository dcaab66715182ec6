#include "trace_panel.hpp"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "trace_loader.hpp"

namespace distlab::viz {
namespace {

constexpr auto kLiveRefresh = std::chrono::milliseconds(200);  // rebuild rows at most 5 times a second
constexpr size_t kMaxMessages = 6;

std::vector<std::string> split_paths(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

ArrowMode parse_arrow_mode(const std::string& name) {
  if (name == "all") return ArrowMode::kAll;
  if (name == "selected") return ArrowMode::kSelected;
  if (name == "none") return ArrowMode::kNone;
  throw std::invalid_argument("arrows: expected all, selected or none, got '" + name + "'");
}

float TraceFrameLayout::band_center(float row_top, uint32_t level) const {
  const auto band = static_cast<float>(std::min<uint32_t>(level, kMaxLevelsShown - 1));
  return row_top + (kRowPadding + band * kLevelHeight + kLevelHeight * 0.5f) * scale;
}

float TraceFrameLayout::memory_y(float row_top, int64_t bytes) const {
  const float top = row_top + kMemoryTrackPad * scale;
  const float bottom = row_top + memory_row_height - kMemoryTrackPad * scale;
  if (memory_full_bytes <= 0) return bottom;
  return bottom - static_cast<float>(static_cast<double>(bytes) / static_cast<double>(memory_full_bytes)) * (bottom - top);
}

// One rank's memory over time: the total of its latest sample, a step area
// from each sample to the next (the last one to the end of the trace).
class TracePanel::MemoryRow : public TimelineRow {
 public:
  MemoryRow(TracePanel& panel, int rank) : panel_(panel), rank_(rank) {}

  std::string label() const override {
    int64_t peak = 0;
    for (const MemoryPoint& p : panel_.memory_.timeline(rank_)) peak = std::max(peak, p.total);
    return "rank " + std::to_string(rank_) + " memory\npeak " + format_bytes(static_cast<double>(peak));
  }

  float height() const override { return kMemoryTrackRowHeight * panel_.scale_; }

  void draw(const TimelineContext& ctx) const override {
    TracePanel& p = panel_;
    const TraceModel& model = p.model_;
    const TraceFrameLayout& l = p.layout_;
    const std::vector<MemoryPoint>& points = p.memory_.timeline(rank_);
    const float bottom = l.memory_y(ctx.row_top, 0);
    const bool mouse_here = ctx.hovered && ctx.mouse.y >= ctx.row_top && ctx.mouse.y < ctx.row_bottom;
    // The first step still visible: the last sample at or before the view's begin.
    const double begin_us = static_cast<double>(model.origin_us()) + ctx.axis.begin_s * 1e6;
    auto first = std::upper_bound(points.begin(), points.end(), begin_us,
                                  [](double t, const MemoryPoint& m) { return t < static_cast<double>(m.at_us); });
    if (first != points.begin()) --first;
    for (auto it = first; it != points.end(); ++it) {
      const auto next = it + 1;
      const int64_t until_us = next != points.end() ? next->at_us : model.end_us();
      const float x0 = std::max(ctx.axis.x_of(model.seconds_of(it->at_us)), ctx.area_min.x - 2.0f);
      const float x1 = std::min(ctx.axis.x_of(model.seconds_of(until_us)), ctx.area_max.x + 2.0f);
      if (x0 > ctx.area_max.x) break;
      const float y = l.memory_y(ctx.row_top, it->total);
      if (x1 > x0) {
        ctx.draw->AddRectFilled(ImVec2(x0, y), ImVec2(x1, bottom), kMemoryTrackFillColor);
        ctx.draw->AddLine(ImVec2(x0, y), ImVec2(x1, y), kMemoryTrackLineColor, 1.5f);
      }
      if (next != points.end()) {
        const float y_next = l.memory_y(ctx.row_top, next->total);
        ctx.draw->AddLine(ImVec2(x1, y), ImVec2(x1, y_next), kMemoryTrackLineColor, 1.5f);
      }
      if (mouse_here && ctx.mouse.x >= x0 && (ctx.mouse.x < x1 || next == points.end()))
        p.memory_hover_ = std::make_pair(rank_, *it);
    }
  }

 private:
  TracePanel& panel_;
  int rank_;
};

// One (rank, lane) of the model as a timeline row.
class TracePanel::Row : public TimelineRow {
 public:
  Row(TracePanel& panel, uint32_t index) : panel_(panel), index_(index) {}

  std::string label() const override {
    const TraceRowData& row = panel_.model_.rows()[index_];
    return "rank " + std::to_string(row.rank) + " " + row.lane;
  }

  float height() const override {
    const size_t levels = std::max<size_t>(1, panel_.model_.rows()[index_].levels.size());
    const float bands = static_cast<float>(std::min<size_t>(levels, kMaxLevelsShown));
    return (bands * kLevelHeight + 2 * kRowPadding) * panel_.scale_;
  }

  void draw(const TimelineContext& ctx) const override {
    TracePanel& p = panel_;
    const TraceModel& model = p.model_;
    const TraceRowData& row = model.rows()[index_];
    // (Not ctx.hovered_row: with flight rows among them, timeline rows are
    // not the model's.)
    const bool mouse_here = ctx.hovered && ctx.mouse.y >= ctx.row_top && ctx.mouse.y < ctx.row_bottom;
    for (uint32_t level = 0; level < row.levels.size(); ++level) {
      const float band = static_cast<float>(std::min<uint32_t>(level, kMaxLevelsShown - 1));
      const float y0 = ctx.row_top + (kRowPadding + band * kLevelHeight) * p.scale_ + 1.0f;
      const float y1 = y0 + kLevelHeight * p.scale_ - 2.0f;
      p.boxes_.clear();
      layout_track(row.levels[level], model.origin_us(), ctx.axis, kMergePx, p.boxes_);
      for (const BoxSpan& box : p.boxes_) {
        const EventRecord& r = model.record(box.event);
        const bool merged = box.count > 1;
        if (merged) {
          // A run of events too narrow to see is a thin grey bar, not a box:
          // it reads as "zoom in here", and costs a third of the pixels.
          const float mid = (y0 + y1) * 0.5f;
          draw_box(ctx, box.x0, box.x1, mid - kMergedHalfHeight * p.scale_, mid + kMergedHalfHeight * p.scale_, kMergedColor, nullptr);
        } else {
          draw_box(ctx, box.x0, box.x1, y0, y1, p.color_of(r.category), model.text(r.name).c_str());
        }
        if (!merged && p.selected_ == box.event)
          ctx.draw->AddRect(ImVec2(box.x0 - 1, y0 - 1), ImVec2(std::max(box.x1, box.x0 + 1) + 1, y1 + 1),
                            kSelectedColor, 0.0f, 0, 2.0f);
        if (mouse_here && ctx.mouse.y >= y0 && ctx.mouse.y < y1 && ctx.mouse.x >= box.x0 - 1 &&
            ctx.mouse.x < std::max(box.x1, box.x0 + 1) + 1)
          p.hover_ = Hover{box.event, box.count, box.x0, box.x1};
      }
      p.layout_.boxes += p.boxes_.size();
      for (const BoxSpan& box : p.boxes_) p.layout_.merged_boxes += box.count > 1;
    }
  }

  Color label_background() const override {
    return panel_.flight_.label_background(panel_.model_.rows()[index_].rank);
  }

 private:
  TracePanel& panel_;
  uint32_t index_;
};

Color TracePanel::color_of(uint32_t category) {
  auto it = category_colors_.find(category);
  if (it != category_colors_.end()) return it->second;
  return category_colors_[category] = category_color(model_.text(category));
}

void TracePanel::open_files(const std::vector<std::string>& paths) { open(open_traces(paths)); }

void TracePanel::open(OpenedTraces opened) {
  model_ = std::move(opened.model);
  clock_offsets_ = std::move(opened.clock_offsets);
  flight_.model().set_clock_offsets(clock_offsets_);
  memory_.clear();
  memory_seen_ = 0;
  sync_memory();
  category_colors_.clear();
  selected_.reset();
  cursor_s_.reset();
  fitted_ = false;
  for (const std::string& w : opened.warnings) messages_.push_back("warning: " + w);
  if (model_.clamped_flow_count() > 0)
    messages_.push_back("warning: " + std::to_string(model_.clamped_flow_count()) +
                        " recv(s) ended before their send began (clocks of different machines without a measured "
                        "offset?); their arrows end at the send");
  std::string names;
  for (const std::string& path : opened.paths) names += (names.empty() ? "" : ", ") + path;
  messages_.push_back("opened " + names + ": " + std::to_string(model_.size()) + " events" +
                      (model_.counter_count() > 0
                           ? ", " + std::to_string(model_.counter_count()) + " counter samples (" +
                                 std::to_string(memory_.samples().size()) + " of memory)"
                           : ""));
}

void TracePanel::set_events(const std::vector<trace::Event>& events) {
  model_.clear();
  category_colors_.clear();
  model_.add(events);
  model_.finalize();
  memory_.clear();
  memory_seen_ = 0;
  sync_memory();
  selected_.reset();
  cursor_s_.reset();
  fitted_ = false;
}

void TracePanel::open_flight(const std::vector<std::string>& paths) {
  FlightModel& flight = flight_.model();
  flight.clear();
  flight.set_clock_offsets(clock_offsets_);
  flight.open(paths);
  for (const std::string& line : flight.diagnosis().refused) messages_.push_back("refused " + line);
  messages_.push_back("flight recorder: " + flight.diagnosis().summary);
  fitted_ = false;
}

bool TracePanel::open_flight_beside(const std::vector<std::string>& trace_paths) {
  const std::vector<std::string> dirs = flight_dirs_beside(trace_paths);
  if (dirs.empty()) return false;
  std::string names;
  for (const std::string& dir : dirs) names += (names.empty() ? "" : ", ") + dir + "/flight.rank*.json";
  messages_.push_back("flight files beside the trace: " + names + " opened too (--flight chooses others)");
  open_flight(dirs);
  return true;
}

void TracePanel::focus_flight() {
  const auto range = flight_.model().focus_range();
  if (!range) return;
  const int64_t origin = origin_us();
  view_.begin_s = (static_cast<double>(range->first) - static_cast<double>(origin)) * 1e-6;
  view_.end_s = (static_cast<double>(range->second) - static_cast<double>(origin)) * 1e-6;
  fitted_ = true;
  follow_live_ = false;
}

int64_t TracePanel::origin_us() const {
  const bool no_trace = model_.empty() && model_.counter_count() == 0;
  return no_trace && flight_.active() ? flight_.model().begin_us() : model_.origin_us();
}

void TracePanel::listen(int port, const std::string& bind_host) {
  live_ = std::make_unique<LiveFeed>(port, bind_host);
  live_errors_seen_ = 0;
  messages_.push_back(live_->announcement());
}

void TracePanel::set_view_ms(double begin_ms, double end_ms) {
  view_.begin_s = begin_ms * 1e-3;
  view_.end_s = end_ms * 1e-3;
  fitted_ = true;
  follow_live_ = false;
}

void TracePanel::fit_all() {
  double begin = 0.0;
  double end = model_.empty() ? 1e-3 : model_.seconds_of(model_.end_us());
  // The flight files' operations too: a hang's last ones may lie past the
  // trace's last event.
  const FlightModel& flight = flight_.model();
  if (flight_.active() && flight.end_us() > flight.begin_us()) {
    const double origin = static_cast<double>(origin_us());
    const double flight_begin = (static_cast<double>(flight.begin_us()) - origin) * 1e-6;
    const double flight_end = (static_cast<double>(flight.end_us()) - origin) * 1e-6;
    const bool no_trace = model_.empty() && model_.counter_count() == 0;
    begin = no_trace ? flight_begin : std::min(begin, flight_begin);
    end = no_trace ? flight_end : std::max(end, flight_end);
  }
  view_.fit(begin, end);
  fitted_ = true;
}

void TracePanel::sync_memory() {
  if (model_.counter_count() < memory_seen_) {
    memory_.clear();
    memory_seen_ = 0;
  }
  for (; memory_seen_ < model_.counter_count(); ++memory_seen_) memory_.add(model_.counter_event(memory_seen_));
}

void TracePanel::update() {
  if (!live_) return;
  if (live_->poll(model_) > 0) live_pending_ = true;
  // Counter samples need no finalize(): the track shows them at once.
  sync_memory();
  const auto now = std::chrono::steady_clock::now();
  if (live_pending_ && now - last_finalize_ >= kLiveRefresh) {
    model_.finalize();
    last_finalize_ = now;
    live_pending_ = false;
    if (follow_live_) fit_all();
  }
  const std::vector<std::string> errors = live_->errors();
  for (; live_errors_seen_ < errors.size(); ++live_errors_seen_) messages_.push_back(errors[live_errors_seen_]);
  for (const auto& [rank, offset] : live_->clock_offsets())
    if (live_offsets_seen_.insert(rank).second && offset.offset_us != 0)
      messages_.push_back("rank " + std::to_string(rank) + ": clock offset to rank 0 " +
                          format_duration(offset.offset_us * 1e-6) + " +- " +
                          format_duration(offset.uncertainty_us * 1e-6) + ", applied to its live events");
}

void TracePanel::draw() {
  // A flight finding is what the user came for: shown first ("Fit" shows all).
  if (!fitted_ && flight_.model().has_marker())
    focus_flight();
  else if (!fitted_)
    fit_all();
  while (messages_.size() > kMaxMessages) messages_.erase(messages_.begin());
  draw_toolbar();
  flight_.begin_frame();
  if (flight_.active() && flight_.draw_banner(scale_)) focus_flight();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float stats_height = show_stats_ && !model_.rows().empty()
                                 ? std::min(avail.y * 0.35f, 60.0f + 20.0f * model_.rows().size())
                                 : 0.0f;
  // The memory track under the rows: its rows whole when they fit in 40%
  // of the height, scrolled (shift+wheel) when they do not.
  const size_t memory_rows = memory_.timeline_ranks().size();
  const float spacing = ImGui::GetStyle().ItemSpacing.y;
  const float memory_height =
      memory_rows == 0 ? 0.0f
                       : std::min((avail.y - stats_height) * 0.4f,
                                  (static_cast<float>(memory_rows) * kMemoryTrackRowHeight + kMemoryTrackGap) * scale_ +
                                      2 * spacing);
  layout_ = TraceFrameLayout{};
  draw_timeline(ImVec2(avail.x, avail.y - stats_height - memory_height));
  if (memory_height > 0.0f) draw_memory_track(ImVec2(avail.x, memory_height - kMemoryTrackGap * scale_ - 2 * spacing));
  if (stats_height > 0.0f) draw_stats();
}

void TracePanel::draw_toolbar() {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 28);
  const bool enter = ImGui::InputTextWithHint("##path", "trace.json (several: a.json, b.json)", &path_input_,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Open") || enter) && !path_input_.empty()) {
    try {
      const std::vector<std::string> paths = split_paths(path_input_);
      open_files(paths);
      flight_.model().clear();
      open_flight_beside(paths);
    } catch (const std::exception& e) {
      messages_.push_back(std::string("error: ") + e.what());
    }
  }
  ImGui::SameLine(0, 30);
  if (live_) {
    ImGui::Text("live %s, %llu events", live_->source().c_str(), static_cast<unsigned long long>(live_->total()));
    ImGui::SameLine();
    if (ImGui::Button("Stop")) live_.reset();
  } else {
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
    ImGui::InputInt("port", &port_input_, 0);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
    ImGui::InputText("bind", &bind_input_);
    ImGui::SameLine();
    if (ImGui::Button("Listen")) {
      try {
        listen(std::clamp(port_input_, 0, 65535), bind_input_);
      } catch (const std::exception& e) {
        messages_.push_back(std::string("error: ") + e.what());
      }
    }
  }

  ImGui::TextUnformatted("arrows:");
  ImGui::SameLine();
  int mode = static_cast<int>(arrows_);
  ImGui::RadioButton("all", &mode, 0);
  ImGui::SameLine();
  ImGui::RadioButton("selected", &mode, 1);
  ImGui::SameLine();
  ImGui::RadioButton("none", &mode, 2);
  arrows_ = static_cast<ArrowMode>(mode);
  ImGui::SameLine(0, 20);
  if (ImGui::Button("Fit")) fit_all();
  ImGui::SameLine();
  ImGui::Checkbox("follow live", &follow_live_);
  ImGui::SameLine();
  ImGui::Checkbox("statistics", &show_stats_);
  ImGui::SameLine(0, 20);
  ImGui::Text("%zu events, %zu rows, %zu arrows | view %s .. %s", model_.size(), model_.rows().size(),
              model_.flow_count(), format_duration(view_.begin_s).c_str(), format_duration(view_.end_s).c_str());
  if (cursor_s_) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kCursorColor), "| cursor %s",
                       format_duration(*cursor_s_).c_str());
  }
  for (const std::string& m : messages_) {
    const bool bad = m.rfind("error", 0) == 0 || m.rfind("live receiver", 0) == 0;
    const bool warn = m.rfind("warning", 0) == 0 || m.rfind("refused", 0) == 0;
    ImGui::TextColored(bad ? ImVec4(1.0f, 0.45f, 0.4f, 1.0f) : warn ? ImVec4(1.0f, 0.8f, 0.3f, 1.0f)
                                                               : ImVec4(0.6f, 0.62f, 0.68f, 1.0f),
                       "%s", m.c_str());
  }
}

void TracePanel::draw_timeline(ImVec2 size) {
  // Rows by rank: the rank's trace rows, then its flight row.
  const int64_t origin = origin_us();
  std::vector<Row> rows;
  rows.reserve(model_.rows().size());
  for (uint32_t i = 0; i < model_.rows().size(); ++i) rows.emplace_back(*this, i);
  std::vector<int> row_ranks;
  for (const TraceRowData& r : model_.rows()) row_ranks.push_back(r.rank);
  const std::vector<int> flight_ranks = flight_.active() ? flight_.model().ranks() : std::vector<int>{};
  std::vector<FlightOverlay::Row> flight_rows;
  for (int rank : flight_ranks) flight_rows.emplace_back(flight_, rank, origin, scale_);
  const std::vector<RowSlot> slots = interleave_rows(row_ranks, flight_ranks);
  std::vector<const TimelineRow*> pointers;
  for (const RowSlot& s : slots)
    pointers.push_back(s.flight ? static_cast<const TimelineRow*>(&flight_rows[s.index]) : &rows[s.index]);

  hover_ = Hover{};
  TimelineStyle style;
  style.label_width *= scale_;
  style.axis_height *= scale_;
  TimelineContext ctx = begin_timeline("trace", view_, pointers, size, style);
  layout_.drawn = true;
  layout_.scale = scale_;
  layout_.axis = ctx.axis;
  layout_.area_min = ctx.area_min;
  layout_.area_max = ctx.area_max;
  layout_.row_tops.assign(rows.size(), 0.0f);  // by model row
  for (size_t t = 0; t < slots.size(); ++t)
    if (!slots[t].flight) layout_.row_tops[slots[t].index] = ctx.row_tops[t];
  draw_arrows(ctx);
  flight_.draw_marker(ctx, origin);
  if (cursor_s_) draw_time_cursor(ctx, *cursor_s_);
  end_timeline(ctx);

  if (ctx.clicked) {
    if (hover_.count == 1)
      selected_ = hover_.event;
    else
      selected_.reset();
    cursor_s_ = ctx.clicked_time_s;
  }
  if (hover_.count > 0 && !ImGui::IsMouseDragging(ImGuiMouseButton_Left)) draw_tooltip(hover_);
  else if (!ImGui::IsMouseDragging(ImGuiMouseButton_Left)) flight_.draw_tooltip(origin);
}

void TracePanel::draw_memory_track(ImVec2 size) {
  std::vector<MemoryRow> rows;
  for (int rank : memory_.timeline_ranks()) rows.emplace_back(*this, rank);
  std::vector<const TimelineRow*> pointers;
  for (const MemoryRow& r : rows) pointers.push_back(&r);

  layout_.memory_ranks = memory_.timeline_ranks();
  layout_.memory_row_height = kMemoryTrackRowHeight * scale_;
  layout_.memory_full_bytes = memory_.max_measured_total();
  memory_hover_.reset();
  ImGui::Dummy(ImVec2(0.0f, kMemoryTrackGap * scale_));
  TimelineStyle style;
  style.label_width *= scale_;  // as the rows above: the same pixels for the same time
  style.axis_height = 0.0f;
  style.axis_labels = false;
  // The rows' times; a zoom or pan over the track moves the rows too.
  memory_view_.begin_s = view_.begin_s;
  memory_view_.end_s = view_.end_s;
  TimelineContext ctx = begin_timeline("memory track", memory_view_, pointers, size, style);
  layout_.memory_drawn = true;
  layout_.memory_axis = ctx.axis;
  layout_.memory_row_tops = ctx.row_tops;
  if (cursor_s_) draw_time_cursor(ctx, *cursor_s_);
  end_timeline(ctx);
  view_.begin_s = memory_view_.begin_s;
  view_.end_s = memory_view_.end_s;
  if (ctx.clicked) cursor_s_ = ctx.clicked_time_s;
  if (memory_hover_ && !ImGui::IsMouseDragging(ImGuiMouseButton_Left))
    draw_memory_tooltip(memory_hover_->first, memory_hover_->second);
}

void TracePanel::draw_memory_tooltip(int rank, const MemoryPoint& point) const {
  const MemorySample& sample = memory_.samples()[point.sample];
  const std::string& stage = memory_.stage_name(point.stage);
  ImGui::BeginTooltip();
  ImGui::Text("rank %d memory%s%s", rank, stage.empty() ? "" : ", ", stage.c_str());
  ImGui::Separator();
  ImGui::Text("at        %s", format_duration(model_.seconds_of(point.at_us)).c_str());
  ImGui::Text("total     %s", format_bytes(static_cast<double>(point.total)).c_str());
  for (int s = 0; s < kMemorySeriesCount; ++s)
    ImGui::Text("%-16s %s", kMemorySeries[s], format_bytes(static_cast<double>(sample.bytes[s])).c_str());
  ImGui::EndTooltip();
}

ImVec2 TracePanel::event_anchor(uint32_t event, bool at_end) const {
  const EventRecord& r = model_.record(event);
  const float x = layout_.axis.x_of(model_.seconds_of(at_end ? r.end_us : r.begin_us));
  return ImVec2(x, layout_.band_center(layout_.row_tops[r.row], r.level));
}

void TracePanel::draw_arrows(const TimelineContext& ctx) {
  auto arrow = [&](const FlowLink& link) {
    // The arrow ends when the data arrived, never before the send began.
    const EventRecord& recv = model_.record(link.recv);
    const ImVec2 to(layout_.axis.x_of(model_.seconds_of(model_.arrival_us(link))),
                    layout_.band_center(layout_.row_tops[recv.row], recv.level));
    draw_arrow(ctx.draw, event_anchor(link.send, false), to, kFlowColor, 1.0f, 7.0f);
    ++layout_.arrows;
  };
  if (arrows_ == ArrowMode::kAll) {
    for (const FlowBundle& bundle : model_.flow_bundles()) {
      links_.clear();
      layout_flows(model_, bundle, ctx.axis, kArrowSpacingPx, links_);
      for (const FlowLink& link : links_) arrow(link);
    }
    return;
  }
  if (arrows_ != ArrowMode::kSelected || !selected_) return;
  // The selected event's own arrow, and those of the events nested in it
  // (selecting a collective shows all of its messages).
  auto own = [&](uint32_t event) {
    if (auto other = model_.partner(event)) {
      const bool is_send = model_.text(model_.record(event).category) == "send";
      arrow(is_send ? FlowLink{event, *other} : FlowLink{*other, event});
    }
  };
  own(*selected_);
  const EventRecord& s = model_.record(*selected_);
  const TraceRowData& row = model_.rows()[s.row];
  for (uint32_t level = s.level + 1; level < row.levels.size(); ++level) {
    const Track& t = row.levels[level];
    auto first = std::lower_bound(t.begin_us.begin(), t.begin_us.end(), s.begin_us) - t.begin_us.begin();
    for (auto i = static_cast<size_t>(first); i < t.begin_us.size() && t.begin_us[i] <= s.end_us; ++i)
      if (t.end_us[i] <= s.end_us) own(t.events[i]);
  }
}

void TracePanel::draw_tooltip(const Hover& hover) const {
  ImGui::BeginTooltip();
  const EventRecord& r = model_.record(hover.event);
  if (hover.count > 1) {
    ImGui::Text("%u events merged (each narrower than %.0f px): zoom in", hover.count, kMergePx);
    ImGui::Text("from %s", format_duration(model_.seconds_of(r.begin_us)).c_str());
  } else {
    const trace::Event e = model_.event(hover.event);
    ImGui::Text("%s", e.name.c_str());
    ImGui::Separator();
    ImGui::Text("category  %s", e.category.c_str());
    ImGui::Text("rank %d, lane %s", e.rank, e.lane.c_str());
    ImGui::Text("begin     %s", format_duration(model_.seconds_of(e.begin_us)).c_str());
    ImGui::Text("duration  %s", format_duration(static_cast<double>(e.duration_us()) * 1e-6).c_str());
    if (e.bytes != 0)
      ImGui::Text("bytes     %s (%lld)", format_bytes(static_cast<double>(e.bytes)).c_str(),
                  static_cast<long long>(e.bytes));
    if (e.peer >= 0) ImGui::Text("peer      rank %d", e.peer);
    if (e.flow != 0) ImGui::Text("flow      %016llx%s", static_cast<unsigned long long>(e.flow),
                                 model_.partner(hover.event) ? "" : " (other end not in the trace)");
    for (const auto& [key, value] : e.args) ImGui::Text("%-9s %s", key.c_str(), value.c_str());
  }
  ImGui::EndTooltip();
}

void TracePanel::draw_stats() {
  const ImGuiTableFlags flags = ImGuiTableFlags_BordersV | ImGuiTableFlags_BordersOuterH | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("lane stats", 9, flags, ImGui::GetContentRegionAvail())) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h : {"rank", "lane", "events", "busy", "busy %", "sum of durations", "mean", "max", "bytes"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  const double span_us = std::max<double>(1.0, static_cast<double>(model_.end_us()) - model_.origin_us());
  for (const TraceRowData& row : model_.rows()) {
    const LaneStats& s = row.stats;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", row.rank);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(row.lane.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%lld", static_cast<long long>(s.count));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(s.busy_us * 1e-6).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.1f", 100.0 * s.busy_us / span_us);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(s.total_us * 1e-6).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(s.count > 0 ? s.total_us * 1e-6 / s.count : 0.0).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(s.max_us * 1e-6).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(static_cast<double>(s.bytes)).c_str());
  }
  ImGui::EndTable();
}

}  // namespace distlab::viz
