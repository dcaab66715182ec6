// The Plan panel (see plan_panel.hpp): the header, predicted against
// measured, the failed layouts, the table, and the selected layout's memory.
#include "plan_panel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "memory_panel.hpp"
#include "timeline.hpp"

namespace distlab::viz {
namespace {

// The Memory panel's colours for the categories both panels show, and
// three more for the planner's own: a gradient shard paler than the
// gradients, the backward scratch and the data.
const std::array<Color, kPlanCategoryCount> kCategoryColors = {
    memory_series_color(0), memory_series_color(1), rgb(255, 204, 128), memory_series_color(2),
    memory_series_color(3), memory_series_color(4), rgb(0, 172, 193),   rgb(141, 110, 99)};

constexpr float kAxisWidth = 64.0f;  // the tick labels left of a plot, at scale 1
constexpr float kPointRadius = 5.0f;
constexpr float kMaxBarWidth = 72.0f;
const ImVec4 kNoteColor(0.6f, 0.62f, 0.68f, 1.0f);  // the notes, as the other panels write them

// Grid spacing: 1, 2 or 5 times a power of ten, about `target`.
double nice_step(double target) {
  const double p = std::pow(10.0, std::floor(std::log10(target)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= target) return m * p;
  return 10.0 * p;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms >= 100 ? "%.0f" : ms >= 10 ? "%.1f" : "%.2f", ms);
  return buf;
}

std::string percent_text(double fraction, bool sign) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", 100.0 * fraction);
  return buf;
}

ImVec4 vec4(Color c) { return ImGui::ColorConvertU32ToFloat4(c); }

// A colour box and its words, on the current line.
void legend_item(Color color, const char* text) {
  const float box = ImGui::GetFontSize() * 0.8f;
  const ImVec2 at = ImGui::GetCursorScreenPos();
  const float dy = (ImGui::GetTextLineHeight() - box) * 0.5f;
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(at.x, at.y + dy), ImVec2(at.x + box, at.y + dy + box), color);
  ImGui::Dummy(ImVec2(box + 4.0f, ImGui::GetTextLineHeight()));
  ImGui::SameLine(0, 0);
  ImGui::TextUnformatted(text);
}

}  // namespace

Color plan_category_color(int category) { return kCategoryColors[static_cast<size_t>(category)]; }

void PlanPanel::open(const std::string& path) { set_plan(read_plan_file(path), path); }

void PlanPanel::set_plan(PlanRecord plan, const std::string& path) {
  plan_ = std::move(plan);
  path_ = path;
  opened_ = true;
  selected_ = -1;
  select(0);
}

void PlanPanel::select(int layout) {
  if (plan_.layouts.empty()) {
    selected_ = -1;
    return;
  }
  selected_ = std::clamp(layout, 0, static_cast<int>(plan_.layouts.size()) - 1);
}

void PlanPanel::draw() {
  layout_ = PlanFrameLayout{};
  hovered_ = -1;
  ImGui::TextUnformatted(
      "Plan: distlab-plan's layouts, the predicted step time against the measured one, and a "
      "layout's predicted memory");
  if (!opened_) {
    ImGui::Spacing();
    ImGui::TextColored(kNoteColor,
                       "No plan. distlab-plan writes one, with the layouts it ran:\n"
                       "  build/planner/distlab-plan --preset cpu --ranks 4 --profile "
                       "planner/profiles/vm-2026-12-01.json --measure 2 --record plan.json\n"
                       "  build/viz/distlab-viz --plan plan.json");
    return;
  }
  layout_.drawn = true;
  layout_.selected = selected_;
  ImGui::PushTextWrapPos(0.0f);  // long lines wrap at the panel's edge
  draw_header();
  ImGui::PopTextWrapPos();
  if (plan_.layouts.empty()) {
    ImGui::TextColored(kNoteColor, "The record holds no layout.");
    return;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const bool side_by_side = avail.x >= avail.y;
  const ImVec2 first =
      side_by_side ? ImVec2(std::floor(avail.x * 0.5f), avail.y) : ImVec2(avail.x, std::floor(avail.y * 0.55f));
  const ImGuiWindowFlags flags =
      ImGuiWindowFlags_NoBackground | ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse;
  if (ImGui::BeginChild("plan scatter side", first, false, flags)) {
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float failed = static_cast<float>(plan_.failed().size()) * line;
    const float table = std::min(first.y * 0.4f, (2.0f + static_cast<float>(plan_.layouts.size())) * line);
    draw_scatter(ImVec2(first.x, std::max(160.0f * scale_, first.y - failed - table - line)));
    ImGui::PushTextWrapPos(0.0f);
    draw_failed();
    ImGui::PopTextWrapPos();
    draw_table(ImGui::GetContentRegionAvail());
  }
  ImGui::EndChild();
  if (side_by_side) ImGui::SameLine(0, 12.0f * scale_);
  if (ImGui::BeginChild("plan memory side", ImGui::GetContentRegionAvail(), false, flags)) {
    ImGui::PushTextWrapPos(0.0f);
    draw_memory(ImGui::GetContentRegionAvail());
    ImGui::PopTextWrapPos();
  }
  ImGui::EndChild();
  layout_.selected = selected_;
  if (hovered_ >= 0 && !ImGui::IsMouseDragging(ImGuiMouseButton_Left))
    draw_tooltip(plan_.layouts[static_cast<size_t>(hovered_)]);
}

void PlanPanel::draw_header() {
  const PlanRecord& p = plan_;
  std::string header = "the " + p.preset + " preset on " + std::to_string(p.ranks) + " ranks (" +
                       std::to_string(p.batch) + " x " + std::to_string(p.bptt) + " tokens a step); profile " +
                       p.profile.machine + ", " + p.profile.date + " (" + std::to_string(p.profile.cores) + " cores";
  if (!p.profile.device.empty()) header += ", " + p.profile.device;
  header += "); " + std::to_string(p.accepted) + " layouts accepted, " + std::to_string(p.refused) + " refused; " +
            p.summary();
  layout_.header = header;
  ImGui::TextUnformatted(header.c_str());
  if (const std::optional<PlanScores> s = p.scores()) {
    char text[320];
    std::snprintf(text, sizeof text,
                  "%d layouts ran: step time error mean %.1f%%, worst %.1f%%; Spearman %.2f; regret %.1f%% (the "
                  "predicted best against the measured best)",
                  s->layouts, 100 * s->mean_abs_error, 100 * s->worst_abs_error, s->spearman, 100 * s->regret);
    layout_.scores = text;
    if (s->memory_layouts > 0)
      layout_.scores += "; job memory error mean " + percent_text(s->memory_mean_abs_error, false) + ", worst " +
                        percent_text(s->memory_worst_abs_error, false);
  } else {
    layout_.scores = "fewer than 2 layouts ran: no scores (distlab-plan --measure K runs some)";
  }
  ImGui::TextUnformatted(layout_.scores.c_str());
}

void PlanPanel::draw_scatter(ImVec2 size) {
  const std::vector<int> ran = plan_.ran();
  if (ran.empty()) {
    ImGui::TextColored(kNoteColor, "No layout ran: distlab-plan --measure K runs the top K and K others.");
    ImGui::Dummy(ImVec2(size.x, std::max(0.0f, size.y - ImGui::GetTextLineHeightWithSpacing())));
    return;
  }
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("plan scatter", size);
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  PlanFrameLayout& l = layout_;

  // A square: one scale on both axes, the diagonal at 45 degrees.
  const float side =
      std::floor(std::max(40.0f, std::min(size.x - kAxisWidth * scale_ - 3.0f * line, size.y - 4.0f * line)));
  l.plot_left = std::floor(origin.x + kAxisWidth * scale_);
  l.plot_right = l.plot_left + side;
  l.plot_top = std::floor(origin.y + 1.5f * line);
  l.plot_bottom = l.plot_top + side;
  double most = 0;
  for (int i : ran) {
    const PlanLayout& layout = plan_.layouts[static_cast<size_t>(i)];
    most = std::max({most, layout.predicted.step_ms, layout.measured->median_ms});
  }
  const double step = nice_step(std::max(most, 1e-9) * 1.05 / 5.0);
  l.lo_ms = 0.0;
  l.hi_ms = std::ceil(most * 1.05 / step) * step;
  l.scatter_drawn = true;
  const auto x_of = [&](double ms) {
    return l.plot_left + static_cast<float>((ms - l.lo_ms) / (l.hi_ms - l.lo_ms)) * (l.plot_right - l.plot_left);
  };
  const auto y_of = [&](double ms) {
    return l.plot_bottom - static_cast<float>((ms - l.lo_ms) / (l.hi_ms - l.lo_ms)) * (l.plot_bottom - l.plot_top);
  };

  // The grid and its ticks, in ms, the same on both axes.
  for (double ms = l.lo_ms; ms <= l.hi_ms * 1.0001; ms += step) {
    const float x = std::floor(x_of(ms)) + 0.5f, y = std::floor(y_of(ms)) + 0.5f;
    const Color grid = ms == l.lo_ms ? kGridColor : (kGridColor & 0x60FFFFFFu);
    d->AddLine(ImVec2(l.plot_left, y), ImVec2(l.plot_right, y), grid);
    d->AddLine(ImVec2(x, l.plot_top), ImVec2(x, l.plot_bottom), grid);
    char tick[32];
    std::snprintf(tick, sizeof tick, "%g", ms);
    const float w = ImGui::CalcTextSize(tick).x;
    d->AddText(ImVec2(l.plot_left - 6.0f - w, y - line * 0.5f), kDimTextColor, tick);
    d->AddText(ImVec2(x - w * 0.5f, l.plot_bottom + 3.0f), kDimTextColor, tick);
  }
  d->AddRect(ImVec2(l.plot_left, l.plot_top), ImVec2(l.plot_right + 1, l.plot_bottom + 1), kGridColor);
  d->AddText(ImVec2(l.plot_left - kAxisWidth * scale_ + 2.0f, origin.y), kTextColor, "measured ms");
  const char* x_title = "predicted ms";
  d->AddText(ImVec2(l.plot_right - ImGui::CalcTextSize(x_title).x, l.plot_bottom + 3.0f + line), kTextColor, x_title);
  const char* note = "above the line: slower than predicted";
  d->AddText(ImVec2(l.plot_left + 6.0f, l.plot_top + 4.0f), kDimTextColor, note);

  // y = x: a perfect prediction.
  d->AddLine(ImVec2(x_of(l.lo_ms), y_of(l.lo_ms)), ImVec2(x_of(l.hi_ms), y_of(l.hi_ms)), kPlanDiagonalColor,
             2.0f * scale_);

  l.point_radius = kPointRadius * scale_;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  float nearest = (2.0f * l.point_radius) * (2.0f * l.point_radius);
  for (int i : ran) {
    const PlanLayout& layout = plan_.layouts[static_cast<size_t>(i)];
    const ImVec2 at(x_of(layout.predicted.step_ms), y_of(layout.measured->median_ms));
    l.points.push_back(PlanPoint{i, at});
    const float dx = mouse.x - at.x, dy = mouse.y - at.y;
    if (hovered && dx * dx + dy * dy <= nearest) {
      nearest = dx * dx + dy * dy;
      hovered_ = i;
    }
  }
  for (const PlanPoint& p : l.points) {
    if (p.layout == selected_) d->AddCircle(p.at, l.point_radius + 3.0f * scale_, kCursorColor, 0, 2.0f * scale_);
    d->AddCircleFilled(p.at, l.point_radius, kPlanPointColor);
    const std::string place = std::to_string(plan_.layouts[static_cast<size_t>(p.layout)].place);
    d->AddText(ImVec2(p.at.x + l.point_radius + 3.0f, p.at.y - line - 1.0f), kTextColor, place.c_str());
  }
  if (clicked && hovered_ >= 0) select(hovered_);
}

void PlanPanel::draw_failed() {
  for (int i : plan_.failed()) {
    const PlanLayout& l = plan_.layouts[static_cast<size_t>(i)];
    const std::string text = "#" + std::to_string(l.place) + " " + l.name + " failed: " + l.measured->error;
    ImGui::TextColored(vec4(kPlanFailedColor), "%s", text.c_str());
  }
}

void PlanPanel::draw_table(ImVec2 size) {
  const ImGuiTableFlags flags = ImGuiTableFlags_BordersV | ImGuiTableFlags_BordersOuterH | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (size.y < ImGui::GetFrameHeightWithSpacing() * 2 || !ImGui::BeginTable("plan layouts", 5, flags, size)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("#");
  ImGui::TableSetupColumn("layout", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("pred ms");
  ImGui::TableSetupColumn("meas ms");
  ImGui::TableSetupColumn("error");
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < plan_.layouts.size(); ++i) {
    const PlanLayout& l = plan_.layouts[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const std::string place = std::to_string(l.place) + "##plan row " + std::to_string(i);
    if (ImGui::Selectable(place.c_str(), static_cast<int>(i) == selected_, ImGuiSelectableFlags_SpanAllColumns))
      select(static_cast<int>(i));
    if (ImGui::IsItemHovered()) hovered_ = static_cast<int>(i);
    if (ImGui::IsItemVisible())
      layout_.rows.push_back(PlanRow{static_cast<int>(i), ImGui::GetItemRectMin(), ImGui::GetItemRectMax()});
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(l.name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(ms_text(l.predicted.step_ms).c_str());
    ImGui::TableNextColumn();
    if (l.failed())
      ImGui::TextColored(vec4(kPlanFailedColor), "failed");
    else
      ImGui::TextUnformatted(l.ran() ? ms_text(l.measured->median_ms).c_str() : "-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(l.ran() ? percent_text(l.error(), true).c_str() : "-");
  }
  ImGui::EndTable();
}

void PlanPanel::draw_memory(ImVec2 size) {
  if (selected_ < 0) return;
  const PlanLayout& l = plan_.layouts[static_cast<size_t>(selected_)];
  PlanFrameLayout& f = layout_;
  const std::string title = "#" + std::to_string(l.place) + " " + l.name + ": predicted memory per pipeline rank";
  ImGui::TextUnformatted(title.c_str());
  ImGui::TextColored(kNoteColor, "pipeline %d x replicas %d x context %d x tensor %d; every layout's bars to one scale",
                     l.pipeline, l.replicas, l.context, l.tensor);
  // The legend, wrapped to the width.
  const float right_edge = ImGui::GetCursorScreenPos().x + size.x;
  for (int c = 0; c < kPlanCategoryCount; ++c) {
    const std::string label = plan_category_label(c);
    const float w = ImGui::GetFontSize() * 0.8f + 4.0f + ImGui::CalcTextSize(label.c_str()).x;
    if (c > 0) {
      ImGui::SameLine(0, 14.0f * scale_);
      if (ImGui::GetCursorScreenPos().x + w > right_edge) ImGui::NewLine();
    }
    legend_item(plan_category_color(c), label.c_str());
  }

  const float line = ImGui::GetTextLineHeight();
  const float job_height = 7.0f * ImGui::GetTextLineHeightWithSpacing();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float height = std::max(120.0f * scale_, ImGui::GetContentRegionAvail().y - job_height);
  ImGui::InvisibleButton("plan memory chart", ImVec2(std::max(size.x, 100.0f), height));
  const bool chart_hovered = ImGui::IsItemHovered();
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float left = std::floor(origin.x + kAxisWidth * scale_);
  const float right = std::floor(origin.x + size.x - 8.0f * scale_);
  f.chart_top = std::floor(origin.y + 1.5f * line);
  f.chart_bottom = std::floor(origin.y + height - 1.5f * line);
  f.full_bytes = std::max<int64_t>(1, plan_.max_rank_bytes());
  const double full = static_cast<double>(f.full_bytes);
  const auto y_of = [&](int64_t bytes) {
    return f.chart_bottom - static_cast<float>(static_cast<double>(bytes) / full) * (f.chart_bottom - f.chart_top);
  };
  const double step = nice_step(full / 5.0);
  for (double b = 0.0; b <= full * 1.0001; b += step) {
    const float y = std::floor(y_of(static_cast<int64_t>(b))) + 0.5f;
    d->AddLine(ImVec2(left - 4, y), ImVec2(right, y), b == 0.0 ? kGridColor : (kGridColor & 0x60FFFFFFu));
    const std::string text = format_bytes(b);
    d->AddText(ImVec2(left - 8 - ImGui::CalcTextSize(text.c_str()).x, y - line * 0.5f), kDimTextColor, text.c_str());
  }

  const float slot = (right - left) / static_cast<float>(l.memory.size());
  const float bar = std::floor(std::min(kMaxBarWidth * scale_, slot * 0.6f));
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int hovered_bar = -1;
  for (size_t r = 0; r < l.memory.size(); ++r) {
    const PlanRankMemory& m = l.memory[r];
    PlanBar b;
    b.pipeline_rank = m.pipeline_rank;
    b.x0 = std::floor(left + slot * static_cast<float>(r) + (slot - bar) * 0.5f);
    b.x1 = b.x0 + bar;
    // Each edge from the running sum, so the stack never drifts from its total.
    int64_t below = 0;
    for (int c = 0; c < kPlanCategoryCount; ++c) {
      b.segment_bottom[c] = y_of(below);
      below += m.bytes[static_cast<size_t>(c)];
      b.segment_top[c] = y_of(below);
      if (b.segment_top[c] < b.segment_bottom[c])
        d->AddRectFilled(ImVec2(b.x0, b.segment_top[c]), ImVec2(b.x1, b.segment_bottom[c]), plan_category_color(c));
    }
    // The set-up peak (the whole training matrix beside the model) when it
    // is the rank's largest.
    if (m.total > m.stacked()) {
      const float y = std::floor(y_of(m.total)) + 0.5f;
      d->AddLine(ImVec2(b.x0 - 3, y), ImVec2(b.x1 + 3, y), kTextColor, 1.0f);
    }
    const std::string total = format_bytes(static_cast<double>(m.total));
    const float tw = ImGui::CalcTextSize(total.c_str()).x;
    d->AddText(
        ImVec2((b.x0 + b.x1 - tw) * 0.5f, std::min(y_of(m.total), b.segment_top[kPlanCategoryCount - 1]) - line - 2),
        kTextColor, total.c_str());
    const std::string label = "rank " + std::to_string(m.pipeline_rank);
    const float lw = ImGui::CalcTextSize(label.c_str()).x;
    d->AddText(ImVec2((b.x0 + b.x1 - lw) * 0.5f, f.chart_bottom + 3), kDimTextColor, label.c_str());
    if (chart_hovered && mouse.x >= b.x0 && mouse.x < b.x1) hovered_bar = static_cast<int>(r);
    f.bars.push_back(b);
  }
  if (hovered_bar >= 0 && !ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    const PlanRankMemory& m = l.memory[static_cast<size_t>(hovered_bar)];
    ImGui::BeginTooltip();
    ImGui::Text("#%d, pipeline rank %d: predicted", l.place, m.pipeline_rank);
    ImGui::Separator();
    for (int c = kPlanCategoryCount - 1; c >= 0; --c)
      ImGui::Text("%-16s %s", plan_category_label(c).c_str(),
                  format_bytes(static_cast<double>(m.bytes[static_cast<size_t>(c)])).c_str());
    ImGui::Text("%-16s %s", "training", format_bytes(static_cast<double>(m.stacked())).c_str());
    ImGui::Text("%-16s %s (the whole training matrix: %s)", "at set-up",
                format_bytes(static_cast<double>(m.total > m.stacked() ? m.total : 0)).c_str(),
                format_bytes(static_cast<double>(m.data_setup)).c_str());
    ImGui::Text("%-16s %s", "peak", format_bytes(static_cast<double>(m.total)).c_str());
    ImGui::EndTooltip();
  }
  draw_job(l, size.x);
}

void PlanPanel::draw_job(const PlanLayout& l, float width) {
  PlanFrameLayout& f = layout_;
  ImGui::Text("predicted %s ms a step (critical path %s, packed %s), bubble %.0f%%, MFU %.1f%%, %s a step on the wire",
              ms_text(l.predicted.step_ms).c_str(), ms_text(l.predicted.critical_ms).c_str(),
              ms_text(l.predicted.packed_ms).c_str(), 100.0 * l.predicted.bubble, 100.0 * l.predicted.mfu,
              format_bytes(static_cast<double>(l.predicted.wire_bytes)).c_str());
  if (l.failed()) {
    ImGui::TextColored(vec4(kPlanFailedColor), "ran and failed: %s", l.measured->error.c_str());
    return;
  }
  if (!l.ran()) {
    ImGui::TextColored(kNoteColor, "not measured; the job's predicted peak, every rank together: %s",
                       format_bytes(static_cast<double>(l.predicted.job_bytes)).c_str());
    return;
  }
  const PlanMeasurement& m = *l.measured;
  ImGui::Text("measured %s ms (median of %zu steps, %s to %s): %s", ms_text(m.median_ms).c_str(), m.steps_ms.size(),
              ms_text(m.low_ms).c_str(), ms_text(m.high_ms).c_str(), percent_text(l.error(), true).c_str());

  // The job's bytes, every rank together: predicted beside metered.
  const float line = ImGui::GetTextLineHeight();
  const float label_width = ImGui::CalcTextSize("metered (allocator)  ").x;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(width, 2.0f * ImGui::GetTextLineHeightWithSpacing()));
  ImDrawList* d = ImGui::GetWindowDrawList();
  f.job_drawn = true;
  f.full_job_bytes = std::max<int64_t>({1, l.predicted.job_bytes, m.metered_bytes});
  f.job_left = std::floor(origin.x + label_width);
  f.job_right = std::floor(origin.x + width * 0.75f);
  const float h = std::floor(line * 0.8f);
  const auto bar = [&](const char* label, int64_t bytes, Color color, float y_top) {
    const float x1 =
        f.job_left + static_cast<float>(static_cast<double>(bytes) / static_cast<double>(f.full_job_bytes)) *
                         (f.job_right - f.job_left);
    d->AddText(ImVec2(origin.x, y_top), kDimTextColor, label);
    const float top = std::floor(y_top + (line - h) * 0.5f);
    d->AddRectFilled(ImVec2(f.job_left, top), ImVec2(x1, top + h), color);
    const std::string text = format_bytes(static_cast<double>(bytes));
    d->AddText(ImVec2(x1 + 6.0f, y_top), kTextColor, text.c_str());
    return top + h * 0.5f;
  };
  f.job_predicted_y = bar("job, predicted", l.predicted.job_bytes, kPlanJobPredictedColor, origin.y);
  f.job_metered_y = bar("metered (allocator)", m.metered_bytes, kPlanJobMeteredColor,
                        origin.y + ImGui::GetTextLineHeightWithSpacing());
  if (const std::optional<double> e = l.memory_error())
    ImGui::TextColored(kNoteColor,
                       "the job's memory: %s (every rank's predicted peak added up, against the "
                       "allocator meter's peak of the run)",
                       percent_text(*e, true).c_str());
}

void PlanPanel::draw_tooltip(const PlanLayout& l) const {
  ImGui::BeginTooltip();
  ImGui::Text("#%d %s", l.place, l.name.c_str());
  ImGui::Separator();
  ImGui::Text("predicted %s ms a step, bubble %.0f%%", ms_text(l.predicted.step_ms).c_str(),
              100.0 * l.predicted.bubble);
  if (l.ran())
    ImGui::Text("measured %s ms (%s to %s): %s", ms_text(l.measured->median_ms).c_str(),
                ms_text(l.measured->low_ms).c_str(), ms_text(l.measured->high_ms).c_str(),
                percent_text(l.error(), true).c_str());
  else if (l.failed())
    ImGui::TextColored(vec4(kPlanFailedColor), "failed: %s", l.measured->error.c_str());
  else
    ImGui::TextUnformatted("not measured");
  ImGui::TextDisabled("%s", l.command.c_str());
  ImGui::EndTooltip();
}

}  // namespace distlab::viz
