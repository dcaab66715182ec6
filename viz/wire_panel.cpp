// The Wire panel (see wire_panel.hpp): the controls, the ring as an
// annulus, the caption, and head and tail over time.
#include "wire_panel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "controls.hpp"
#include "ring_scene.hpp"
#include "timeline.hpp"

namespace distlab::viz {
namespace {

constexpr float kTwoPi = 6.28318530718f;
constexpr float kAxisWidth = 80.0f;  // the byte labels left of the plot, at scale 1
constexpr float kLineWidth = 2.0f;   // the plot's lines and its cursor

// Turn t (0 at 12 o'clock, clockwise) at `radius` from `centre`.
ImVec2 at_turn(ImVec2 centre, float radius, double turn) {
  const float a = kTwoPi * static_cast<float>(turn);
  return ImVec2(centre.x + radius * std::sin(a), centre.y - radius * std::cos(a));
}

// The part of the annulus from turn `from` on for `length` turns, as quads
// with no anti-aliased fringe: neighbours share their edges exactly, so no
// seam of the background shows between them.
void fill_arc(ImDrawList* d, ImVec2 centre, float inner, float outer, double from, double length, Color color) {
  if (length <= 0.0) return;
  const int segments = std::max(1, static_cast<int>(std::ceil(length * 160.0)));
  const ImDrawListFlags flags = d->Flags;
  d->Flags &= ~ImDrawListFlags_AntiAliasedFill;
  for (int i = 0; i < segments; ++i) {
    const double a = from + length * i / segments, b = from + length * (i + 1) / segments;
    d->AddQuadFilled(at_turn(centre, outer, a), at_turn(centre, outer, b), at_turn(centre, inner, b),
                     at_turn(centre, inner, a), color);
  }
  d->Flags = flags;
}

// A radial marker at `turn` from r0 to r1 with `label` centred at radius r_label.
void marker(ImDrawList* d, ImVec2 centre, double turn, float r0, float r1, float r_label, const char* label) {
  d->AddLine(at_turn(centre, r0, turn), at_turn(centre, r1, turn), kTextColor, 2.0f);
  const ImVec2 size = ImGui::CalcTextSize(label);
  const ImVec2 at = at_turn(centre, r_label, turn);
  d->AddText(ImVec2(at.x - size.x * 0.5f, at.y - size.y * 0.5f), kTextColor, label);
}

// A colour box and its words, on the current line.
void legend(Color color, const std::string& text) {
  const float box = ImGui::GetFontSize() * 0.8f;
  const ImVec2 at = ImGui::GetCursorScreenPos();
  const float dy = (ImGui::GetTextLineHeight() - box) * 0.5f;
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(at.x, at.y + dy), ImVec2(at.x + box, at.y + dy + box), color);
  ImGui::Dummy(ImVec2(box + 6.0f, ImGui::GetTextLineHeight()));
  ImGui::SameLine(0, 0);
  ImGui::TextUnformatted(text.c_str());
}

std::string ring_title(const WireRing& ring) {
  return ring_label(ring.id) + ": rank " + std::to_string(ring.id.from) + " writes, rank " +
         std::to_string(ring.id.to) + " reads (" + std::to_string(ring.samples.size()) + " samples)";
}

}  // namespace

bool WirePanel::set_trace(const std::vector<trace::Event>& events) {
  model_ = WireModel(events);
  ring_ = sample_ = 0;
  return !model_.empty();
}

bool WirePanel::select_ring(const RingId& id) {
  const int index = model_.find(id);
  if (index >= 0) show_ring(index);
  return index >= 0;
}

void WirePanel::show_ring(int index) {
  if (index != ring_) sample_ = 0;
  ring_ = index;
}

int WirePanel::sample_count() const {
  return model_.empty() ? 0 : static_cast<int>(model_.rings()[static_cast<size_t>(ring_)].samples.size());
}

void WirePanel::set_sample(int index) { sample_ = std::clamp(index, 0, std::max(0, sample_count() - 1)); }
void WirePanel::step_forward() { set_sample(sample_ + 1); }
void WirePanel::step_back() { set_sample(sample_ - 1); }

void WirePanel::draw() {
  layout_ = WireFrameLayout{};
  ImGui::TextUnformatted("The same-host ring in shared memory: the sender copies chunks in and moves head, the "
                         "receiver copies them out and moves tail");
  if (!model_.skipped_text().empty())
    ImGui::TextColored(ImVec4(1.0f, 0.7f, 0.3f, 1.0f), "%s", model_.skipped_text().c_str());
  if (model_.empty()) {
    ImGui::Spacing();
    ImGui::TextColored(ImVec4(0.6f, 0.62f, 0.68f, 1.0f),
                       "No ring samples (counters named \"shm ring S->D (LABEL)\"). The same-host transport records "
                       "them when a job of processes on one host is traced:\n"
                       "  build/launcher/distlab-run --nproc-per-node 2 --master-port 0 -- "
                       "build/lessons/lesson_02_point_to_point --backend auto --trace t.json\n"
                       "  build/viz/distlab-viz --trace t.json --panel wire");
    return;
  }
  ring_ = std::clamp(ring_, 0, static_cast<int>(model_.rings().size()) - 1);
  set_sample(sample_);
  draw_controls();
  const WireRing& ring = model_.rings()[static_cast<size_t>(ring_)];
  const WireSample& s = ring.samples[static_cast<size_t>(sample_)];
  layout_.drawn = true;
  layout_.ring = ring_;
  layout_.sample = sample_;
  layout_.view = wire_view(s);

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float plot_height = std::max(120.0f * scale_, avail.y * 0.35f);
  draw_ring(ring, ImVec2(avail.x, std::max(160.0f * scale_, avail.y - plot_height - line)));

  const WireView& v = layout_.view;
  char caption[320];
  std::snprintf(caption, sizeof caption,
                "sample %d of %zu (rank %d, t = %s us): head %s B, tail %s B, %s B in flight (%.1f%% of the ring), "
                "%s B moved",
                sample_ + 1, ring.samples.size(), s.rank, format_count(s.at_us - model_.origin_us()).c_str(),
                format_count(v.head_at).c_str(), format_count(v.tail_at).c_str(), format_count(v.occupied).c_str(),
                100.0 * v.fill, format_count(v.moved).c_str());
  layout_.caption = caption;
  ImGui::TextUnformatted(caption);
  draw_plot(ring, ImVec2(avail.x, std::max(80.0f, ImGui::GetContentRegionAvail().y)));
}

void WirePanel::draw_controls() {
  const auto& rings = model_.rings();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 22);
  if (ImGui::BeginCombo("##ring", ring_title(rings[static_cast<size_t>(ring_)]).c_str())) {
    for (size_t i = 0; i < rings.size(); ++i)
      if (ImGui::Selectable(ring_title(rings[i]).c_str(), static_cast<int>(i) == ring_)) show_ring(static_cast<int>(i));
    ImGui::EndCombo();
  }
  // The sample: buttons, the slider, and the arrow keys as in the other panels.
  step_with_arrow_keys([this] { step_back(); }, [this] { step_forward(); });
  ImGui::SameLine();
  if (ImGui::Button("< sample")) step_back();
  ImGui::SameLine();
  if (ImGui::Button("sample >")) step_forward();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 16);
  int shown = sample_ + 1;
  if (ImGui::SliderInt("##sample", &shown, 1, sample_count(), "sample %d")) set_sample(shown - 1);
  ImGui::SameLine();
  ImGui::TextDisabled("of %d (arrow keys step; click the plot to jump)", sample_count());
}

void WirePanel::draw_ring(const WireRing& ring, ImVec2 size) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float text = ImGui::GetTextLineHeight();
  const float margin = 2.5f * text + 12.0f * scale_;  // ticks and the head label outside the ring
  const float outer = std::floor(std::max(20.0f, std::min(size.x * 0.5f, size.y * 0.5f) - margin));
  const float inner = std::floor(outer * 0.62f);
  const ImVec2 centre(std::floor(origin.x + margin + outer), std::floor(origin.y + size.y * 0.5f));
  const WireView& v = layout_.view;
  const Color sender = rank_color(ring.id.from);
  layout_.centre = centre;
  layout_.inner_radius = inner;
  layout_.outer_radius = outer;
  layout_.occupied_color = sender;

  // What is in flight, tail to head clockwise, and the rest.
  fill_arc(d, centre, inner, outer, v.tail_turn, v.fill, sender);
  fill_arc(d, centre, inner, outer, v.tail_turn + v.fill, 1.0 - v.fill, kWireFreeColor);
  const float tick = 8.0f * scale_;
  for (int k = 0; k < 8; ++k)
    d->AddLine(at_turn(centre, outer + 3.0f, k / 8.0), at_turn(centre, outer + 3.0f + tick, k / 8.0), kDimTextColor,
               1.5f);
  // head outside the ring, tail inside: both stay readable when they meet.
  marker(d, centre, v.head_turn, inner, outer + tick + 6.0f, outer + tick + 8.0f + text, "head");
  marker(d, centre, v.tail_turn, inner - 6.0f, outer, inner - 8.0f - text, "tail");
  char percent[16];
  std::snprintf(percent, sizeof percent, "%.1f%%", 100.0 * v.fill);
  const ImVec2 p = ImGui::CalcTextSize(percent);
  d->AddText(ImVec2(centre.x - p.x * 0.5f, centre.y - p.y), kTextColor, percent);
  const ImVec2 f = ImGui::CalcTextSize("in flight");
  d->AddText(ImVec2(centre.x - f.x * 0.5f, centre.y), kDimTextColor, "in flight");

  // The legend, right of the ring.
  const ImVec2 after = ImGui::GetCursorScreenPos();
  ImGui::SetCursorScreenPos(ImVec2(centre.x + outer + margin + 16.0f * scale_, origin.y + text));
  ImGui::BeginGroup();
  legend(sender, "in flight: written by rank " + std::to_string(ring.id.from) + ", not yet read by rank " +
                     std::to_string(ring.id.to));
  legend(kWireFreeColor, "free");
  const int64_t capacity = ring.samples[static_cast<size_t>(sample_)].capacity;
  ImGui::Text("capacity %s B; a tick every capacity / 8 = %s B (the chunk copied at once)",
              format_count(capacity).c_str(), format_count(capacity / 8).c_str());
  ImGui::TextDisabled("12 o'clock is byte 0 of the ring; a byte's place is its count %% capacity");
  ImGui::EndGroup();
  ImGui::SetCursorScreenPos(after);
}

void WirePanel::draw_plot(const WireRing& ring, ImVec2 size) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("wire plot", size);
  const bool clicked = ImGui::IsItemActive();
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float text = ImGui::GetTextLineHeight();
  WireFrameLayout& l = layout_;
  l.plot_left = std::floor(origin.x + kAxisWidth * scale_);
  l.plot_right = std::floor(origin.x + size.x - 8.0f * scale_);
  l.plot_top = std::floor(origin.y + 1.5f * text);
  l.plot_bottom = std::floor(origin.y + size.y - 1.5f * text);
  l.t0_us = ring.samples.front().at_us;
  l.t1_us = ring.samples.back().at_us;
  l.low = ring.samples.front().tail;
  l.high = ring.samples.front().head;
  for (const WireSample& s : ring.samples) {
    l.low = std::min(l.low, s.tail);
    l.high = std::max(l.high, s.head);
  }
  l.head_color = rank_color(ring.id.from);
  l.tail_color = rank_color(ring.id.to);
  // One sample, or samples at one time, or head never moving: spans of at least 1.
  const double t_span = static_cast<double>(std::max<int64_t>(1, l.t1_us - l.t0_us));
  const double b_span = static_cast<double>(std::max<int64_t>(1, l.high - l.low));
  const auto x_of = [&](int64_t t) {
    return std::floor(l.plot_left + static_cast<float>((t - l.t0_us) / t_span) * (l.plot_right - l.plot_left));
  };
  const auto y_of = [&](int64_t b) {
    return std::floor(l.plot_bottom - static_cast<float>((b - l.low) / b_span) * (l.plot_bottom - l.plot_top));
  };

  d->AddRect(ImVec2(l.plot_left - 1, l.plot_top - 1), ImVec2(l.plot_right + 1, l.plot_bottom + 1), kGridColor);
  for (const int64_t b : {l.low, l.high}) {
    const std::string label = format_bytes(static_cast<double>(b));
    const float w = ImGui::CalcTextSize(label.c_str()).x;
    d->AddText(ImVec2(l.plot_left - 8.0f - w, y_of(b) - text * 0.5f), kDimTextColor, label.c_str());
  }
  const std::string t0 = format_count(l.t0_us - model_.origin_us()) + " us";
  const std::string t1 = format_count(l.t1_us - model_.origin_us()) + " us";
  d->AddText(ImVec2(l.plot_left, l.plot_bottom + 3.0f), kDimTextColor, t0.c_str());
  d->AddText(ImVec2(l.plot_right - ImGui::CalcTextSize(t1.c_str()).x, l.plot_bottom + 3.0f), kDimTextColor,
             t1.c_str());
  d->AddText(ImVec2(l.plot_left + 6.0f, origin.y), l.head_color, "head (bytes written)");
  d->AddText(ImVec2(l.plot_left + 6.0f + ImGui::CalcTextSize("head (bytes written)   ").x, origin.y), l.tail_color,
             "tail (bytes read)");

  // Step lines: each value holds until the next sample. Rectangles on whole
  // pixels, so that a line's pixels are exactly its colour.
  const float w = kLineWidth * 0.5f;
  const auto step_line = [&](int64_t WireSample::*value, Color color) {
    for (size_t k = 0; k < ring.samples.size(); ++k) {
      const float x0 = x_of(ring.samples[k].at_us), y = y_of(ring.samples[k].*value);
      const bool last = k + 1 == ring.samples.size();
      const float x1 = last ? l.plot_right : x_of(ring.samples[k + 1].at_us);
      d->AddRectFilled(ImVec2(x0 - w, y - w), ImVec2(x1 + w, y + w), color);
      if (!last) {
        const float y1 = y_of(ring.samples[k + 1].*value);
        d->AddRectFilled(ImVec2(x1 - w, std::min(y, y1) - w), ImVec2(x1 + w, std::max(y, y1) + w), color);
      }
    }
  };
  step_line(&WireSample::head, l.head_color);
  step_line(&WireSample::tail, l.tail_color);
  const float cursor = x_of(ring.samples[static_cast<size_t>(sample_)].at_us);
  d->AddRectFilled(ImVec2(cursor - w, l.plot_top), ImVec2(cursor + w, l.plot_bottom), kCursorColor);

  // A click or a drag on the plot: the last sample at or before that time.
  if (clicked && l.plot_right > l.plot_left) {
    const double t = l.t0_us + (ImGui::GetIO().MousePos.x - l.plot_left) / (l.plot_right - l.plot_left) * t_span;
    const auto before = [](double at, const WireSample& s) { return at < static_cast<double>(s.at_us); };
    const auto after = std::upper_bound(ring.samples.begin(), ring.samples.end(), t, before);
    set_sample(static_cast<int>(after - ring.samples.begin()) - 1);
  }
}

}  // namespace distlab::viz
