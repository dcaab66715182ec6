#include "pipeline_panel.hpp"

#include <imgui.h>

#include "controls.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace distlab::viz {
namespace {

using pipeline::ScheduleKind;

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100.0);
  return text;
}

// Text drawn only when it fits inside the box: a label cut in half reads
// worse than none.
void box_with_label(const TimelineContext& ctx, float x0, float x1, float y0, float y1, Color fill,
                    const std::string& label, Color text) {
  draw_box(ctx, x0, x1, y0, y1, fill, nullptr);
  const ImVec2 size = ImGui::CalcTextSize(label.c_str());
  if (x1 - x0 < size.x + 4.0f) return;
  ctx.draw->AddText(ImVec2((x0 + x1 - size.x) * 0.5f, (y0 + y1 - size.y) * 0.5f), text, label.c_str());
}

// One rank of a timed schedule: a box per compute action.
class ScheduleRow : public TimelineRow {
 public:
  ScheduleRow(const PipelineRun& run, int rank, float height, std::string prefix)
      : run_(run), rank_(rank), height_(height), prefix_(std::move(prefix)) {}
  std::string label() const override { return prefix_ + "rank " + std::to_string(rank_); }
  float height() const override { return height_; }
  void draw(const TimelineContext& ctx) const override {
    const int p = run_.schedule.ranks, v = run_.schedule.stages_per_rank;
    for (const ActionBox& b : run_.boxes[rank_]) {
      const float x0 = ctx.axis.x_of(b.begin_s), x1 = ctx.axis.x_of(b.end_s);
      if (x1 < ctx.area_min.x || x0 > ctx.area_max.x) continue;
      const bool dark = b.type == pipeline::ActionType::kBackward;
      // A pixel between neighbours keeps back-to-back actions apart.
      box_with_label(ctx, x0 + 0.5f, x1 - 0.5f, ctx.row_top + 2, ctx.row_bottom - 2, action_color(b.type, b.microbatch),
                     action_label(b, p, v), dark ? kTextColor : rgb(16, 16, 16));
    }
    draw_compounds(ctx);
  }

  // OVERLAP_F_B (DualPipeV): its two halves, one forward and one backward
  // of other microbatches, as one action: a bracket over both, from the
  // forward's start to the backward's end, in the row's top margin.
  void draw_compounds(const TimelineContext& ctx) const {
    const auto& row = run_.boxes[rank_];
    for (size_t k = 0; k + 1 < row.size(); ++k) {
      if (row[k].compound.empty() || row[k + 1].compound != row[k].compound) continue;
      const float x0 = ctx.axis.x_of(row[k].begin_s) + 0.5f, x1 = ctx.axis.x_of(row[k + 1].end_s) - 0.5f;
      if (x1 < ctx.area_min.x || x0 > ctx.area_max.x) continue;
      ctx.draw->AddRectFilled(ImVec2(x0, ctx.row_top), ImVec2(x1, ctx.row_top + 2.0f), kCompoundColor);
      ctx.draw->AddRect(ImVec2(x0, ctx.row_top), ImVec2(x1, ctx.row_bottom - 1.0f), kCompoundColor);
      ++k;  // both halves drawn
    }
  }

 private:
  const PipelineRun& run_;
  int rank_;
  float height_;
  std::string prefix_;
};

// One stage's activations held over time, as a step curve filled down to
// the row's bottom; a full row is `scale_max` microbatches.
class MemoryRow : public TimelineRow {
 public:
  MemoryRow(const PipelineRun& run, int stage, float height, int scale_max, std::string prefix)
      : run_(run), stage_(stage), height_(height), scale_max_(std::max(1, scale_max)), prefix_(std::move(prefix)) {}
  std::string label() const override {
    return prefix_ + "stage " + std::to_string(stage_) + ": peak " + std::to_string(run_.peak_activations[stage_]);
  }
  float height() const override { return height_; }
  void draw(const TimelineContext& ctx) const override {
    const auto& points = run_.activations[stage_];
    const float usable = height_ - 4.0f;
    for (size_t k = 0; k + 1 < points.size(); ++k) {
      if (points[k].second <= 0) continue;
      const float x0 = ctx.axis.x_of(points[k].first), x1 = ctx.axis.x_of(points[k + 1].first);
      if (x1 < ctx.area_min.x || x0 > ctx.area_max.x || x1 <= x0) continue;
      const float top = ctx.row_bottom - 2.0f - usable * points[k].second / scale_max_;
      ctx.draw->AddRectFilled(ImVec2(x0, top), ImVec2(x1, ctx.row_bottom - 2.0f), kMemoryColor);
    }
  }

 private:
  const PipelineRun& run_;
  int stage_;
  float height_;
  int scale_max_;
  std::string prefix_;
};

std::vector<const TimelineRow*> pointers_of(const std::vector<ScheduleRow>& a) {
  std::vector<const TimelineRow*> out;
  for (const auto& row : a) out.push_back(&row);
  return out;
}

}  // namespace

std::vector<ScheduleKind> parse_schedule_list(const std::string& text) {
  std::vector<ScheduleKind> out;
  std::stringstream in(text);
  std::string name;
  try {
    while (std::getline(in, name, ','))
      if (!name.empty()) out.push_back(pipeline::parse_kind(name));
  } catch (const pipeline::ScheduleError& e) {
    throw std::invalid_argument(e.what());
  }
  if (out.empty()) {
    out = pipeline::all_kinds();
    out.resize(kMaxSchedulesSideBySide);
  }
  if (out.size() > kMaxSchedulesSideBySide)
    throw std::invalid_argument("at most " + std::to_string(kMaxSchedulesSideBySide) +
                                " schedules side by side, got " + std::to_string(out.size()));
  return out;
}

PipelinePanel::PipelinePanel(const Options& o) : scale_(o.scale) {
  setup_.ranks = o.pipeline_stages;
  setup_.microbatches = o.microbatches;
  setup_.chunks = o.chunks;
  setup_.costs = {o.cost_forward, o.cost_backward, o.cost_weight, o.cost_send};
  kinds_ = parse_schedule_list(o.schedule);
  rebuild();
}

void PipelinePanel::rebuild() {
  std::vector<PipelineRun> runs;
  for (ScheduleKind kind : kinds_) {
    PipelineSetup s = setup_;
    s.kind = kind;
    runs.push_back(simulate_run(s));
  }
  runs_ = std::move(runs);
  double end = 0.0;
  for (const PipelineRun& run : runs_) end = std::max(end, run.makespan_s);
  view_.fit(0.0, end);
  view_.scroll_y = 0.0f;
}

bool PipelinePanel::set_trace(const std::vector<trace::Event>& events) {
  std::optional<MeasuredPipeline> found = measure_trace(events);
  if (!found) return false;
  measured_ = std::move(found);
  show_measured_ = true;
  measured_view_.fit(0.0, std::max(measured_->trace_run.makespan_s, measured_->simulated.makespan_s));
  return true;
}

void PipelinePanel::draw() {
  layout_ = PipelineFrameLayout{};
  draw_controls();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const size_t table_rows = showing_measured() ? 2 : runs_.size();
  const float summary_height = ImGui::GetFrameHeightWithSpacing() * (table_rows + 1.6f);
  if (showing_measured()) {
    layout_.measured_view = true;
    draw_measured(ImVec2(avail.x, std::max(200.0f, avail.y - summary_height)));
  } else {
    // The plots take a fifth of the height, within bounds, under the columns.
    const float plots_height = std::clamp(avail.y * 0.2f, 100.0f * scale_, 200.0f * scale_);
    const ImVec2 area(avail.x, std::max(200.0f, avail.y - summary_height - plots_height));
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float width = (area.x - spacing * (runs_.size() - 1)) / std::max<size_t>(1, runs_.size());
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (i > 0) ImGui::SameLine();
      draw_column(i, ImVec2(width, area.y));
    }
    draw_plots(ImVec2(avail.x, plots_height - ImGui::GetStyle().ItemSpacing.y));
  }
  draw_summary();
}

void PipelinePanel::draw_controls() {
  bool changed = false;
  if (measured_) {
    if (ImGui::RadioButton("compare schedules", !show_measured_)) show_measured_ = false;
    ImGui::SameLine();
    if (ImGui::RadioButton("measured against simulated", show_measured_)) show_measured_ = true;
    ImGui::SameLine(0, 20);
  }
  for (ScheduleKind kind : pipeline::all_kinds()) {
    auto at = std::find(kinds_.begin(), kinds_.end(), kind);
    bool on = at != kinds_.end();
    if (ImGui::Checkbox(pipeline::display_name(kind), &on)) {
      if (!on && kinds_.size() > 1) {
        kinds_.erase(at);
        changed = true;
      } else if (on && kinds_.size() < kMaxSchedulesSideBySide) {
        std::vector<ScheduleKind> ordered;  // the teaching order, whatever order they are ticked in
        for (ScheduleKind k : pipeline::all_kinds())
          if (k == kind || std::find(kinds_.begin(), kinds_.end(), k) != kinds_.end()) ordered.push_back(k);
        kinds_ = ordered;
        changed = true;
      }
    }
    ImGui::SameLine();
  }
  const float narrow = ImGui::GetFontSize() * 5;
  ImGui::SameLine(0, 16);
  ImGui::SetNextItemWidth(narrow);
  changed |= ImGui::SliderInt("p", &setup_.ranks, 1, 8);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(narrow);
  changed |= ImGui::SliderInt("m", &setup_.microbatches, 1, 32);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(narrow);
  changed |= ImGui::SliderInt("v", &setup_.chunks, 1, 4);
  auto cost = [&](const char* label, double& value) {
    ImGui::SameLine();
    changed |= input_clamped(label, value, 0.0, 1e6, 5);
  };
  cost("F s", setup_.costs.forward);
  cost("B s", setup_.costs.backward);
  cost("W s", setup_.costs.weight);
  cost("send s", setup_.costs.send);
  if (changed) rebuild_or_report([&] { rebuild(); }, error_);
  if (!error_.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", error_.c_str());
}

PipelineFrameLayout::Column PipelinePanel::draw_memory(const char* id, const std::vector<const PipelineRun*>& runs,
                                                       ImVec2 size, int scale_max) {
  size_t count = 0;
  for (const PipelineRun* run : runs) count += run->activations.size();
  const float row_height = std::clamp((size.y - 26.0f * scale_) / std::max<size_t>(1, count), kMemoryRowHeight * scale_,
                                      2.0f * kMemoryRowHeight * scale_);
  std::vector<MemoryRow> rows;
  for (const PipelineRun* run : runs) {
    const std::string prefix = runs.size() > 1 ? (run == runs.front() ? "sim " : "meas ") : "";
    for (int s = 0; s < static_cast<int>(run->activations.size()); ++s)
      rows.emplace_back(*run, s, row_height, scale_max, prefix);
  }
  std::vector<const TimelineRow*> pointers;
  for (const auto& row : rows) pointers.push_back(&row);
  TimelineStyle style;
  style.label_width = (runs.size() > 1 ? 150.0f : 118.0f) * scale_;  // room for "meas stage 1: peak 2"
  style.axis_height *= scale_;
  TimelineView& view = showing_measured() ? measured_view_ : view_;
  const TimelineContext ctx = begin_timeline(id, view, pointers, size, style);
  end_timeline(ctx);
  PipelineFrameLayout::Column out;
  out.memory_axis = ctx.axis;
  out.memory_row_tops = ctx.row_tops;
  out.memory_row_height = row_height;
  out.memory_scale = std::max(1, scale_max);
  return out;
}

void PipelinePanel::draw_column(size_t index, ImVec2 size) {
  const PipelineRun& run = runs_[index];
  const int p = run.schedule.ranks, m = run.schedule.microbatches;
  ImGui::BeginGroup();
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(schedule_color(run.schedule.kind)), "%s: %s",
                     pipeline::display_name(run.schedule.kind), format_duration(run.makespan_s).c_str());
  if (run.closed)
    ImGui::Text("bubble %s  (closed form %s)", percent(run.bubble).c_str(), percent(run.closed->bubble).c_str());
  else
    ImGui::Text("bubble %s  ((p-1)/(m+p-1) = %s)", percent(run.bubble).c_str(),
                percent(pipeline::gpipe_bubble(p, m)).c_str());
  TimelineStyle style;
  style.label_width = 118.0f * scale_;
  style.axis_height *= scale_;
  // Rows grow into the room there is (half of it for the ranks), up to twice their height.
  const float text_height = ImGui::GetTextLineHeightWithSpacing() * 3.0f;
  const float row_height = std::clamp((size.y * 0.5f - style.axis_height - text_height) / p, kPipelineRowHeight * scale_,
                                      2.0f * kPipelineRowHeight * scale_);
  const float stages_height = style.axis_height + kMemoryRowHeight * scale_ * run.schedule.num_stages() + 4.0f;
  const float schedule_height =
      std::min(style.axis_height + row_height * p + 4.0f, std::max(80.0f, size.y - text_height - stages_height));
  std::vector<ScheduleRow> rows;
  for (int r = 0; r < p; ++r) rows.emplace_back(run, r, row_height, "");
  const std::string id = "schedule" + std::to_string(index);
  const TimelineContext ctx = begin_timeline(id.c_str(), view_, pointers_of(rows), ImVec2(size.x, schedule_height), style);
  end_timeline(ctx);
  ImGui::TextDisabled("activations held (microbatches)");
  int scale_max = 1;
  for (const PipelineRun& r : runs_) scale_max = std::max(scale_max, r.peak());
  const float memory_height = std::max(60.0f, size.y - schedule_height - text_height);
  const std::string memory_id = "memory" + std::to_string(index);
  PipelineFrameLayout::Column column = draw_memory(memory_id.c_str(), {&run}, ImVec2(size.x, memory_height), scale_max);
  column.axis = ctx.axis;
  column.row_tops = ctx.row_tops;
  column.row_height = row_height;
  ImGui::EndGroup();
  layout_.columns.push_back(std::move(column));
}

void PipelinePanel::draw_measured(ImVec2 size) {
  const MeasuredPipeline& mp = *measured_;
  const int p = mp.trace_run.schedule.ranks;
  // One pipeline of several (the capstone's replicas) says which.
  const std::string which = mp.trace_run.schedule.describe() + group_label(mp.group, mp.world_ranks);
  ImGui::Text("%s, step %lld: measured %s, bubble %s; simulated with the measured costs %s, bubble %s",
              which.c_str(), static_cast<long long>(mp.step),
              format_duration(mp.trace_run.makespan_s).c_str(), percent(mp.trace_run.bubble).c_str(),
              format_duration(mp.simulated.makespan_s).c_str(), percent(mp.simulated.bubble).c_str());
  TimelineStyle style;
  style.label_width = 150.0f * scale_;  // as the memory rows below, so the two axes line up
  style.axis_height *= scale_;
  const float row_height = kPipelineRowHeight * scale_;
  std::vector<ScheduleRow> rows;
  for (int r = 0; r < p; ++r) rows.emplace_back(mp.simulated, r, row_height, "sim ");
  for (int r = 0; r < p; ++r) rows.emplace_back(mp.trace_run, r, row_height, "measured ");
  const float text_height = ImGui::GetTextLineHeightWithSpacing() * 2.0f;
  const float schedule_height = std::min(style.axis_height + row_height * 2 * p + 4.0f, size.y * 0.55f);
  const TimelineContext ctx =
      begin_timeline("measured", measured_view_, pointers_of(rows), ImVec2(size.x, schedule_height), style);
  end_timeline(ctx);
  ImGui::TextDisabled("activations held (microbatches): simulated, then measured");
  const int scale_max = std::max({1, mp.simulated.peak(), mp.trace_run.peak()});
  PipelineFrameLayout::Column column = draw_memory("measured memory", {&mp.simulated, &mp.trace_run},
                                                   ImVec2(size.x, std::max(60.0f, size.y - schedule_height - text_height)),
                                                   scale_max);
  column.axis = ctx.axis;
  column.row_tops = ctx.row_tops;
  column.row_height = row_height;
  layout_.columns.push_back(std::move(column));
}

// The sweep is asked for every frame and run again only when the setup
// changed (the cache's key: kinds, p, v, costs), so dragging m costs nothing.
void PipelinePanel::draw_plots(ImVec2 size) {
  const std::vector<SweepSeries>& series = sweep_.get(setup_, kinds_);
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const ImVec2 each((size.x - spacing) * 0.5f, size.y);
  bool first = true;
  for (SweepQuantity quantity : {SweepQuantity::kBubble, SweepQuantity::kRankPeak}) {
    if (!first) ImGui::SameLine();
    first = false;
    ImGui::BeginGroup();
    const char* id = quantity == SweepQuantity::kBubble ? "bubble vs m" : "peak vs m";
    layout_.plots.push_back(draw_sweep_plot(id, series, quantity, setup_.microbatches, setup_.ranks, each, scale_));
    ImGui::EndGroup();
  }
}

void PipelinePanel::draw_summary() {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("pipeline summary", 7, flags)) return;
  for (const char* h : {"schedule", "makespan", "bubble", "closed form", "(p-1)/(m+p-1)", "peak activations (per stage)",
                        "vs fastest"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  std::vector<std::pair<std::string, const PipelineRun*>> shown;
  if (showing_measured()) {
    shown = {{"simulated (measured costs)", &measured_->simulated}, {"measured", &measured_->trace_run}};
  } else {
    for (const PipelineRun& run : runs_) shown.push_back({run.title, &run});
  }
  double fastest = 0.0;
  for (const auto& [name, run] : shown)
    if (fastest == 0.0 || run->makespan_s < fastest) fastest = run->makespan_s;
  for (const auto& [name, run] : shown) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(run->makespan_s).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(percent(run->bubble).c_str());
    ImGui::TableNextColumn();
    const std::string closed = run->closed ? percent(run->closed->bubble) + "  " + run->closed->formula : "none";
    ImGui::TextUnformatted(closed.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(percent(pipeline::gpipe_bubble(run->schedule.ranks, run->schedule.microbatches)).c_str());
    ImGui::TableNextColumn();
    std::string peaks = std::to_string(run->peak()) + "  (";
    for (size_t s = 0; s < run->peak_activations.size(); ++s)
      peaks += (s ? " " : "") + std::to_string(run->peak_activations[s]);
    ImGui::TextUnformatted((peaks + ")").c_str());
    ImGui::TableNextColumn();
    if (fastest > 0.0)
      ImGui::Text("%.2fx", run->makespan_s / fastest);
    else
      ImGui::TextDisabled("-");
  }
  ImGui::EndTable();
}

}  // namespace distlab::viz
