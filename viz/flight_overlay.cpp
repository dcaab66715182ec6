// FlightOverlay (flight_overlay.hpp): the flight rows, the marker, the
// culprit's highlight, the banner and the tooltip, drawn with ImGui.
#include "flight_overlay.hpp"

#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "trace_layout.hpp"
#include "trace_panel.hpp"

namespace distlab::viz {
namespace {

Color state_color(flight::State state) {
  switch (state) {
    case flight::State::kCompleted: return kFlightDoneColor;
    case flight::State::kFailed:
    case flight::State::kTimedOut: return kFlightFailedColor;
    case flight::State::kEntered:
    case flight::State::kStarted: return kFlightOpenColor;
  }
  return kFlightOpenColor;
}

double seconds(int64_t us, int64_t origin_us) {
  return (static_cast<double>(us) - static_cast<double>(origin_us)) * 1e-6;
}

float line_x(const TimeAxis& axis, double t) { return std::floor(axis.x_of(t)) + 0.5f; }

}  // namespace

std::vector<RowSlot> interleave_rows(const std::vector<int>& trace_row_ranks, const std::vector<int>& flight_ranks) {
  struct Keyed {
    int rank;
    RowSlot slot;
  };
  std::vector<Keyed> all;
  for (uint32_t i = 0; i < trace_row_ranks.size(); ++i) all.push_back({trace_row_ranks[i], {false, i}});
  for (uint32_t i = 0; i < flight_ranks.size(); ++i) all.push_back({flight_ranks[i], {true, i}});
  std::stable_sort(all.begin(), all.end(), [](const Keyed& a, const Keyed& b) {
    return a.rank != b.rank ? a.rank < b.rank : !a.slot.flight && b.slot.flight;
  });
  std::vector<RowSlot> out;
  for (const Keyed& k : all) out.push_back(k.slot);
  return out;
}

std::optional<float> FlightFrameLayout::row_top_of(int rank) const {
  for (size_t i = 0; i < row_ranks.size(); ++i)
    if (row_ranks[i] == rank) return row_tops[i];
  return std::nullopt;
}

std::string FlightOverlay::Row::label() const {
  // One line: the row is one band high. How the rank's work ended is in
  // the banner's text when it matters.
  const bool file = overlay_.model_.dump_of(rank_) != nullptr;
  return "rank " + std::to_string(rank_) + (file ? " flight" : ": no file");
}

float FlightOverlay::Row::height() const { return (kLevelHeight + 2 * kRowPadding) * scale_; }

Color FlightOverlay::Row::label_background() const { return overlay_.label_background(rank_); }

void FlightOverlay::Row::draw(const TimelineContext& ctx) const {
  const FlightModel& m = overlay_.model_;
  FlightFrameLayout& l = overlay_.layout_;
  l.row_ranks.push_back(rank_);
  l.row_tops.push_back(ctx.row_top);
  l.row_height = height();
  if (m.is_culprit(rank_))
    ctx.draw->AddRectFilled(ImVec2(ctx.area_min.x, ctx.row_top), ImVec2(ctx.area_max.x, ctx.row_bottom - 1.0f),
                            kFlightCulpritRowColor);
  const flight::Dump* dump = m.dump_of(rank_);
  if (dump == nullptr) return;
  const float y0 = ctx.row_top + kRowPadding * scale_ + 1.0f;
  const float y1 = y0 + kLevelHeight * scale_ - 2.0f;
  const bool mouse_here = ctx.hovered && ctx.mouse.y >= y0 && ctx.mouse.y < y1;
  // A run of completed operations each narrower than kMergePx is one box
  // (a zoomed-out row of 2,000 would cost the rasterizer 2,000 boxes);
  // anything else is drawn alone, marked operations last, so that
  // overlapping spans (isend and irecv in flight together) never hide them.
  bool in_run = false;
  float run_x0 = 0.0f, run_x1 = 0.0f;
  auto end_run = [&] {
    if (in_run) {
      draw_box(ctx, run_x0, run_x1, y0, y1, kFlightDoneColor, nullptr);
      ++l.boxes;
    }
    in_run = false;
  };
  std::vector<size_t> marked;
  auto draw_one = [&](size_t i, bool may_merge) {
    const FlightOpRef ref{rank_, i};
    const flight::Entry& e = dump->entries[i];
    const float x0 = ctx.axis.x_of(seconds(e.entered_us, origin_us_));
    const float x1 = std::max(ctx.axis.x_of(seconds(m.span_end_us(ref), origin_us_)), x0 + 1.0f);
    if (x1 < ctx.area_min.x - 1.0f || x0 > ctx.area_max.x + 1.0f) return;
    if (mouse_here && ctx.mouse.x >= x0 - 1.0f && ctx.mouse.x < x1 + 1.0f) overlay_.hover_ = ref;
    if (may_merge && e.state == flight::State::kCompleted && x1 - x0 < kMergePx) {
      if (in_run && x0 <= run_x1 + kMergePx) {
        run_x1 = std::max(run_x1, x1);
      } else {
        end_run();
        in_run = true;
        run_x0 = x0;
        run_x1 = x1;
      }
      return;
    }
    end_run();
    // The name only where draw_box has room for it.
    const std::string name = x1 - x0 >= 24.0f ? flight::name_of(e) : std::string();
    draw_box(ctx, x0, x1, y0, y1, state_color(e.state), name.empty() ? nullptr : name.c_str());
    ++l.boxes;
    if (e.started_us != 0 && e.started_us > e.entered_us) {
      const float xs = std::floor(ctx.axis.x_of(seconds(e.started_us, origin_us_))) + 0.5f;
      if (xs > x0 + 1.0f && xs < x1 - 1.0f)
        ctx.draw->AddLine(ImVec2(xs, y0), ImVec2(xs, y0 + 4.0f * scale_), kFlightStartTickColor, 1.0f);
    }
    if (m.is_marked(ref))
      ctx.draw->AddRect(ImVec2(std::max(x0, ctx.area_min.x - 2.0f) - 1.0f, y0 - 1.0f),
                        ImVec2(std::min(x1, ctx.area_max.x + 2.0f) + 1.0f, y1 + 1.0f), kFlightMarkerColor, 0.0f, 0, 2.0f);
  };
  for (size_t i = 0; i < dump->entries.size(); ++i) {
    if (m.is_marked({rank_, i}))
      marked.push_back(i);
    else
      draw_one(i, true);
  }
  end_run();
  for (size_t i : marked) draw_one(i, false);
}

void FlightOverlay::begin_frame() {
  layout_ = FlightFrameLayout{};
  hover_.reset();
}

Color FlightOverlay::label_background(int rank) const {
  return model_.is_culprit(rank) ? kFlightCulpritRowColor : 0;
}

void FlightOverlay::draw_marker(const TimelineContext& ctx, int64_t origin_us) {
  if (!model_.has_marker()) return;
  const FlightMarker& mk = model_.marker();
  ImDrawList* d = ctx.draw;
  const float top = ctx.area_min.y;
  const float bottom = ctx.area_max.y;
  layout_.band_x0 = ctx.axis.x_of(seconds(mk.band_begin_us, origin_us));
  layout_.band_x1 = ctx.axis.x_of(seconds(mk.band_end_us, origin_us));
  if (layout_.band_x1 - layout_.band_x0 >= 1.0f)
    d->AddRectFilled(ImVec2(std::max(layout_.band_x0, ctx.area_min.x - 1.0f), top),
                     ImVec2(std::min(layout_.band_x1, ctx.area_max.x + 1.0f), bottom), kFlightMarkerColor & 0x30FFFFFFu);
  if (mk.has_culprit_time) {
    layout_.culprit_x = line_x(ctx.axis, seconds(mk.culprit_us, origin_us));
    layout_.culprit_drawn = true;
    d->AddLine(ImVec2(layout_.culprit_x, top), ImVec2(layout_.culprit_x, bottom), kFlightCulpritLineColor, 1.0f);
  }
  layout_.marker_x = line_x(ctx.axis, seconds(mk.at_us, origin_us));
  layout_.marker_drawn = true;
  d->AddLine(ImVec2(layout_.marker_x, top), ImVec2(layout_.marker_x, bottom), kFlightMarkerColor, kFlightMarkerWidth);
}

bool FlightOverlay::draw_banner(float scale) {
  const flight::Diagnosis& dx = model_.diagnosis();
  const std::string text = dx.findings.empty() ? std::string() : dx.findings.front().text;
  const std::string head = "flight recorder: " + dx.summary +
                           (dx.findings.empty() ? std::string() : "; finding: " + dx.findings.front().cause);
  const float width = ImGui::GetContentRegionAvail().x;
  const float pad = 5.0f * scale;
  const float stripe = 4.0f * scale;
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  const float wrap = width - 2 * pad - stripe;
  const ImVec2 text_size = ImGui::CalcTextSize(text.c_str(), nullptr, false, wrap);
  const float height = ImGui::GetFrameHeight() + text_size.y + 2 * pad + ImGui::GetStyle().ItemSpacing.y;
  ImDrawList* d = ImGui::GetWindowDrawList();
  d->AddRectFilled(pos, ImVec2(pos.x + width, pos.y + height), kFlightBannerColor);
  d->AddRectFilled(pos, ImVec2(pos.x + stripe, pos.y + height), model_.has_marker() ? kFlightMarkerColor : kDimTextColor);

  bool focus = false;
  ImGui::SetCursorScreenPos(ImVec2(pos.x + stripe + pad, pos.y + pad));
  ImGui::AlignTextToFramePadding();
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kDimTextColor), "%s", head.c_str());
  if (dx.findings.size() > 1) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kDimTextColor), "(+%zu more: hover)", dx.findings.size() - 1);
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::TextUnformatted(flight::to_text(dx).c_str());
      ImGui::EndTooltip();
    }
  }
  if (model_.has_marker()) {
    ImGui::SameLine();
    focus = ImGui::SmallButton("show where they part");
  }
  // Wrapped lines start where the first one does, right of the stripe.
  ImGui::SetCursorScreenPos(ImVec2(pos.x + stripe + pad, ImGui::GetCursorScreenPos().y));
  const float local_x = ImGui::GetCursorPosX();
  ImGui::PushTextWrapPos(local_x + wrap);
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopTextWrapPos();

  ImGui::SetCursorScreenPos(pos);
  ImGui::Dummy(ImVec2(width, height));
  layout_.banner_drawn = true;
  layout_.banner_text = text;
  layout_.banner_min = pos;
  layout_.banner_max = ImVec2(pos.x + width, pos.y + height);
  return focus;
}

void FlightOverlay::draw_tooltip(int64_t origin_us) const {
  if (!hover_) return;
  const flight::Dump& dump = *model_.dump_of(hover_->rank);
  const flight::Entry& e = dump.entries[hover_->entry];
  auto at = [origin_us](int64_t us) { return us == 0 ? std::string("-") : format_duration(seconds(us, origin_us)); };
  ImGui::BeginTooltip();
  ImGui::Text("%s", flight::name_of(e).c_str());
  ImGui::Separator();
  ImGui::Text("rank %d, %s", dump.rank,
              e.kind == "collective" ? ("group " + e.group + " rank " + std::to_string(e.group_rank)).c_str() : "p2p");
  ImGui::Text("data      %s, %s", flight::shape_text(e).c_str(), format_bytes(static_cast<double>(e.bytes)).c_str());
  if (!e.algorithm.empty()) ImGui::Text("algorithm %s", e.algorithm.c_str());
  if (e.root >= 0) ImGui::Text("root      rank %d", e.root);
  if (!e.site.empty()) ImGui::Text("site      %s", e.site.c_str());
  ImGui::Text("state     %s", flight::to_string(e.state));
  ImGui::Text("entered   %s", at(e.entered_us).c_str());
  ImGui::Text("started   %s", at(e.started_us).c_str());
  ImGui::Text("ended     %s", e.done() ? at(e.ended_us).c_str() : ("not at the dump, " + at(dump.dumped_us)).c_str());
  if (!e.error.empty()) ImGui::Text("error     %s", e.error.c_str());
  if (model_.is_marked(*hover_))
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kFlightMarkerColor), "%s",
                       std::find(model_.marker().waiting_ops.begin(), model_.marker().waiting_ops.end(), *hover_) !=
                               model_.marker().waiting_ops.end()
                           ? "the finding's operation: this rank waits in it"
                           : "the culprit's operation");
  ImGui::EndTooltip();
}

}  // namespace distlab::viz
