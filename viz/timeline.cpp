#include "timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace distlab::viz {
namespace {

constexpr double kMinSpanS = 1e-7;  // zooming in stops at 100 ns across the view
constexpr double kMaxSpanS = 1e7;
constexpr float kClickSlopPx = 3.0f;  // a press that moved less than this is a click

// Tick spacing: 1, 2 or 5 times a power of ten, about `target` seconds.
double nice_step(double target) {
  const double p = std::pow(10.0, std::floor(std::log10(target)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= target) return m * p;
  return 10.0 * p;
}

void draw_axis(const TimelineContext& ctx, float top, float bottom, bool labels) {
  const TimeAxis& a = ctx.axis;
  const double step = nice_step(a.seconds_per_pixel() * 110.0);
  const double first = std::ceil(a.begin_s / step) * step;
  for (double t = first; t <= a.end_s; t += step) {
    const float x = std::floor(a.x_of(t)) + 0.5f;
    ctx.draw->AddLine(ImVec2(x, bottom - 6), ImVec2(x, bottom), kGridColor);
    ctx.draw->AddLine(ImVec2(x, bottom), ImVec2(x, ctx.area_max.y), kGridColor & 0x40FFFFFFu);
    // Ticks near zero come out as 1e-17 from the accumulation: print them as 0.
    const std::string text = format_duration(std::fabs(t) < step * 1e-6 ? 0.0 : t);
    if (labels && x >= ctx.area_min.x) ctx.draw->AddText(ImVec2(x + 3, top + 2), kDimTextColor, text.c_str());
  }
}

// Text cut to `clip` on the CPU. A clip rect pushed on the draw list would
// cost a draw call per label, and a software rasterizer pays some 20 us for
// each: a few hundred labelled boxes would double the frame time.
void clipped_text(ImDrawList* d, ImVec2 at, Color color, const char* text, const ImVec4& clip) {
  d->AddText(ImGui::GetFont(), ImGui::GetFontSize(), at, color, text, nullptr, 0.0f, &clip);
}

}  // namespace

void TimelineView::fit(double begin, double end) {
  if (!(end > begin)) end = begin + 1e-3;
  const double margin = (end - begin) * 0.02;
  begin_s = begin - margin;
  end_s = end + margin;
}

void TimelineView::zoom_at(double anchor_s, double factor) {
  const double span = std::clamp((end_s - begin_s) * factor, kMinSpanS, kMaxSpanS);
  const double fraction = (anchor_s - begin_s) / (end_s - begin_s);
  begin_s = anchor_s - fraction * span;
  end_s = begin_s + span;
}

void TimelineView::pan(double delta_s) {
  begin_s += delta_s;
  end_s += delta_s;
}

std::vector<float> stack_rows(const std::vector<const TimelineRow*>& rows) {
  std::vector<float> tops;
  tops.reserve(rows.size());
  float y = 0.0f;
  for (const TimelineRow* row : rows) {
    tops.push_back(y);
    y += row->height();
  }
  return tops;
}

TimelineContext begin_timeline(const char* id, TimelineView& view, const std::vector<const TimelineRow*>& rows,
                               ImVec2 size, const TimelineStyle& style) {
  TimelineContext ctx;
  ctx.draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  size.x = std::max(size.x, style.label_width + 50.0f);
  size.y = std::max(size.y, style.axis_height + 20.0f);
  ImGui::InvisibleButton(id, size);
  const bool item_hovered = ImGui::IsItemHovered();
  const bool item_active = ImGui::IsItemActive();
  const bool released = ImGui::IsItemDeactivated();

  ctx.area_min = ImVec2(origin.x + style.label_width, origin.y + style.axis_height);
  ctx.area_max = ImVec2(origin.x + size.x, origin.y + size.y);
  ctx.axis = TimeAxis{view.begin_s, view.end_s, ctx.area_min.x, ctx.area_max.x};

  // Rows: clamp the scroll to the content, then place them.
  std::vector<float> tops = stack_rows(rows);
  const float content = rows.empty() ? 0.0f : tops.back() + rows.back()->height();
  const float visible = ctx.area_max.y - ctx.area_min.y;
  view.scroll_y = std::clamp(view.scroll_y, 0.0f, std::max(0.0f, content - visible));
  for (size_t i = 0; i < rows.size(); ++i) {
    ctx.row_tops.push_back(ctx.area_min.y + tops[i] - view.scroll_y);
    ctx.row_heights.push_back(rows[i]->height());
  }

  // Input: the wheel zooms at the mouse, a drag pans, a still press clicks.
  const ImGuiIO& io = ImGui::GetIO();
  ctx.mouse = io.MousePos;
  ctx.hovered = item_hovered && ctx.mouse.x >= ctx.area_min.x && ctx.mouse.y >= ctx.area_min.y;
  for (size_t i = 0; i < rows.size() && item_hovered; ++i)
    if (ctx.mouse.y >= ctx.row_tops[i] && ctx.mouse.y < ctx.row_tops[i] + ctx.row_heights[i]) ctx.hovered_row = int(i);
  if (item_hovered && io.MouseWheel != 0.0f) {
    if (io.KeyShift) {
      view.scroll_y -= io.MouseWheel * 40.0f;
    } else {
      const double anchor = ctx.axis.time_at(std::max(ctx.mouse.x, ctx.area_min.x));
      view.zoom_at(anchor, std::pow(0.8, io.MouseWheel));
    }
  }
  if (item_active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, kClickSlopPx)) {
    view.pan(-io.MouseDelta.x * ctx.axis.seconds_per_pixel());
    view.scroll_y -= io.MouseDelta.y;
  }
  if (released && io.MouseDragMaxDistanceSqr[0] < kClickSlopPx * kClickSlopPx && ctx.mouse.x >= ctx.area_min.x) {
    ctx.clicked = true;
    ctx.clicked_row = ctx.hovered_row;
    ctx.clicked_time_s = ctx.axis.time_at(ctx.mouse.x);
  }

  // Background, axis, labels.
  ImDrawList* d = ctx.draw;
  // No background fill: the frame is cleared to kCanvasColor (colors.hpp).
  d->PushClipRect(ImVec2(origin.x, ctx.area_min.y), ctx.area_max, true);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!ctx.row_visible(int(i))) continue;
    const float top = ctx.row_tops[i];
    const float bottom = top + ctx.row_heights[i];
    if (const Color fill = rows[i]->label_background(); fill != 0)
      d->AddRectFilled(ImVec2(origin.x, top), ImVec2(ctx.area_min.x - 1, bottom), fill);
    else if (i % 2 == 1)
      d->AddRectFilled(ImVec2(origin.x, top), ImVec2(ctx.area_min.x - 1, bottom), kRowAltColor);
    d->AddLine(ImVec2(origin.x, bottom - 0.5f), ImVec2(ctx.area_max.x, bottom - 0.5f), kRowLineColor);
    const std::string label = rows[i]->label();
    clipped_text(d, ImVec2(origin.x + 6, top + 3), kTextColor, label.c_str(),
                 ImVec4(origin.x, top, ctx.area_min.x - 4, bottom));
  }
  d->AddLine(ImVec2(ctx.area_min.x - 0.5f, ctx.area_min.y), ImVec2(ctx.area_min.x - 0.5f, ctx.area_max.y), kGridColor);
  d->PopClipRect();
  d->PushClipRect(origin, ctx.area_max, true);
  draw_axis(ctx, origin.y, ctx.area_min.y, style.axis_labels);
  d->PopClipRect();

  // Rows draw inside the track area only.
  d->PushClipRect(ctx.area_min, ctx.area_max, true);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!ctx.row_visible(int(i))) continue;
    ctx.row_top = ctx.row_tops[i];
    ctx.row_bottom = ctx.row_top + ctx.row_heights[i];
    rows[i]->draw(ctx);
  }
  return ctx;
}

void end_timeline(const TimelineContext& ctx) { ctx.draw->PopClipRect(); }

void draw_box(const TimelineContext& ctx, float x0, float x1, float y0, float y1, Color fill, const char* label) {
  x0 = std::max(x0, ctx.area_min.x - 1.0f);  // keep huge zooms inside float range
  x1 = std::min(std::max(x1, x0 + 1.0f), ctx.area_max.x + 1.0f);
  ctx.draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), fill);
  if (label == nullptr || x1 - x0 < 24.0f) return;
  const float left = std::max(x0, ctx.area_min.x);
  const float text_y = y0 + (y1 - y0 - ImGui::GetFontSize()) * 0.5f;
  clipped_text(ctx.draw, ImVec2(left + 3, text_y), rgb(16, 16, 16), label,
               ImVec4(left, y0, std::min(x1, ctx.area_max.x) - 2, y1));
}

void draw_arrow(ImDrawList* draw, ImVec2 from, ImVec2 to, Color color, float thickness, float head) {
  const float dx = to.x - from.x;
  const float dy = to.y - from.y;
  const float length = std::sqrt(dx * dx + dy * dy);
  if (length < 1e-3f) return;
  const float ux = dx / length;
  const float uy = dy / length;
  head = std::min(head, length * 0.6f);
  const ImVec2 base(to.x - ux * head, to.y - uy * head);
  draw->AddLine(from, base, color, thickness);
  const float half = head * 0.5f;
  draw->AddTriangleFilled(to, ImVec2(base.x - uy * half, base.y + ux * half),
                          ImVec2(base.x + uy * half, base.y - ux * half), color);
}

void draw_time_cursor(const TimelineContext& ctx, double t, Color color) {
  const float x = std::floor(ctx.axis.x_of(t)) + 0.5f;
  if (x < ctx.area_min.x || x > ctx.area_max.x) return;
  ctx.draw->AddLine(ImVec2(x, ctx.area_min.y), ImVec2(x, ctx.area_max.y), color, 2.0f);
}

std::string format_duration(double seconds) {
  char buf[32];
  const double a = std::fabs(seconds);
  if (a == 0.0)
    std::snprintf(buf, sizeof buf, "0 s");
  else if (a >= 1.0)
    std::snprintf(buf, sizeof buf, "%.4g s", seconds);
  else if (a >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.4g ms", seconds * 1e3);
  else if (a >= 1e-6)
    std::snprintf(buf, sizeof buf, "%.4g us", seconds * 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.4g ns", seconds * 1e9);
  return buf;
}

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3g MB", bytes / 1e6);
  else if (bytes >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3g kB", bytes / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

}  // namespace distlab::viz
