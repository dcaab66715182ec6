#include "pipeline_plots.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "pipeline/simulator.hpp"

namespace distlab::viz {
namespace {

// A value as the plots print it: a bubble in percent with `percent_digits`
// decimals (1 for values, 0 for a grid line's "25%"), else microbatches ("8").
std::string value_text(double value, SweepQuantity quantity, int percent_digits = 1) {
  char text[32];
  if (quantity == SweepQuantity::kBubble)
    std::snprintf(text, sizeof text, "%.*f%%", percent_digits, value * 100.0);
  else
    std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// The top of the scale: bubbles up to a multiple of 20% (quarters fall on
// whole 5%), peaks up to a multiple of 4 microbatches (quarters are whole).
double scale_top(const std::vector<SweepSeries>& series, SweepQuantity quantity, int ranks) {
  double top = quantity == SweepQuantity::kBubble ? pipeline::gpipe_bubble(std::max(1, ranks), 1) : 0.0;
  for (const SweepSeries& s : series)
    for (const SweepPoint& point : s.points) top = std::max(top, sweep_value(point, quantity));
  if (quantity == SweepQuantity::kBubble) return std::clamp(std::ceil(top * 5.0 - 1e-9) / 5.0, 0.2, 1.0);
  return std::max(4.0, std::ceil(top / 4.0 - 1e-9) * 4.0);
}

}  // namespace

double sweep_value(const SweepPoint& point, SweepQuantity quantity) {
  return quantity == SweepQuantity::kBubble ? point.bubble : point.rank_peak;
}

SweepPlotLayout draw_sweep_plot(const char* id, const std::vector<SweepSeries>& series, SweepQuantity quantity,
                                int current_m, int ranks, ImVec2 size, float scale) {
  // The title, then each schedule's value at the current m in its colour.
  ImGui::TextUnformatted(quantity == SweepQuantity::kBubble ? "bubble vs m" : "peak activations vs m (busiest rank, microbatches)");
  for (const SweepSeries& s : series) {
    ImGui::SameLine(0, 12.0f * scale);
    const SweepPoint* point = s.at(current_m);
    const std::string text = std::string(pipeline::display_name(s.kind)) + " " + (point ? value_text(sweep_value(*point, quantity), quantity) : "-");
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(schedule_color(s.kind)), "%s", text.c_str());
  }

  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float line = ImGui::GetTextLineHeight();
  size.y = std::max(size.y - ImGui::GetTextLineHeightWithSpacing(), 60.0f * scale);
  ImGui::InvisibleButton(id, size);
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* d = ImGui::GetWindowDrawList();

  SweepPlotLayout out;
  out.quantity = quantity;
  out.left = origin.x + 48.0f * scale;  // room for "25.0%" and "32"
  out.right = origin.x + size.x - 10.0f * scale;
  out.top = origin.y + line * 0.5f;
  out.bottom = origin.y + size.y - line - 4.0f * scale;  // m's labels under it
  out.y_max = scale_top(series, quantity, ranks);

  // Grid: quarters of the scale, and m = first, 8, 16, ...
  for (int k = 0; k <= 4; ++k) {
    const double value = out.y_max * k / 4.0;
    const float y = std::floor(out.y_of(value)) + 0.5f;
    d->AddLine(ImVec2(out.left, y), ImVec2(out.right, y), k == 0 ? kGridColor : (kGridColor & 0x60FFFFFFu));
    const std::string text = value_text(value, quantity, /*percent_digits=*/0);
    d->AddText(ImVec2(out.left - 6.0f * scale - ImGui::CalcTextSize(text.c_str()).x, y - line * 0.5f), kDimTextColor,
               text.c_str());
  }
  for (int m = out.first_m; m <= out.last_m; m = m < 8 ? 8 : m + 8) {
    const float x = std::floor(out.x_of(m)) + 0.5f;
    d->AddLine(ImVec2(x, out.bottom), ImVec2(x, out.bottom + 4.0f * scale), kGridColor);
    const std::string text = m == out.first_m ? "m = " + std::to_string(m) : std::to_string(m);
    const float w = ImGui::CalcTextSize(text.c_str()).x;
    d->AddText(ImVec2(m == out.first_m ? x - 4.0f * scale : x - w * 0.5f, out.bottom + 4.0f * scale), kDimTextColor,
               text.c_str());
  }

  // The current m, under the lines so they stay readable where they cross it.
  const float marker_x = out.x_of(current_m);
  d->AddRectFilled(ImVec2(marker_x - kSweepMarkerWidth * 0.5f * scale, out.top),
                   ImVec2(marker_x + kSweepMarkerWidth * 0.5f * scale, out.bottom), kCursorColor);

  // The law GPipe and 1F1B follow: (p-1)/(m+p-1), thin and grey.
  if (quantity == SweepQuantity::kBubble && ranks >= 1) {
    std::vector<ImVec2> law;
    for (int m = out.first_m; m <= out.last_m; ++m) law.push_back(ImVec2(out.x_of(m), out.y_of(pipeline::gpipe_bubble(ranks, m))));
    d->AddPolyline(law.data(), static_cast<int>(law.size()), kDimTextColor, ImDrawFlags_None, 1.0f);
  }

  // One line per schedule, a square on every m it takes.
  const float half = kSweepPointHalf * scale;
  for (const SweepSeries& s : series) {
    const Color color = schedule_color(s.kind);
    std::vector<ImVec2> points;
    for (const SweepPoint& point : s.points)
      points.push_back(ImVec2(out.x_of(point.microbatches), out.y_of(sweep_value(point, quantity))));
    d->AddPolyline(points.data(), static_cast<int>(points.size()), color, ImDrawFlags_None, 1.5f * scale);
    for (const ImVec2& at : points) d->AddRectFilled(ImVec2(at.x - half, at.y - half), ImVec2(at.x + half, at.y + half), color);
  }

  // Hovering names the m under the mouse and every schedule's value there.
  if (hovered) {
    const float mouse_x = ImGui::GetIO().MousePos.x;
    const int m = std::clamp(static_cast<int>(std::lround(out.first_m + (mouse_x - out.left) / (out.right - out.left) *
                                                                            (out.last_m - out.first_m))),
                             out.first_m, out.last_m);
    ImGui::BeginTooltip();
    ImGui::Text("m = %d", m);
    if (quantity == SweepQuantity::kBubble) ImGui::TextDisabled("(p-1)/(m+p-1) = %s", value_text(pipeline::gpipe_bubble(ranks, m), quantity).c_str());
    for (const SweepSeries& s : series) {
      const SweepPoint* point = s.at(m);
      const std::string text = std::string(pipeline::display_name(s.kind)) + ": " +
                               (point ? value_text(sweep_value(*point, quantity), quantity) : "refuses this m");
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(schedule_color(s.kind)), "%s", text.c_str());
    }
    ImGui::EndTooltip();
  }
  return out;
}

}  // namespace distlab::viz
