#include "experts_panel.hpp"

#include <imgui.h>

#include <algorithm>
#include <cstdio>

namespace distlab::viz {
namespace {

constexpr float kMaxBarWidth = 64.0f;
constexpr float kBarGap = 12.0f;

}  // namespace

bool ExpertsPanel::set_trace(const std::vector<trace::Event>& events) {
  model_.clear();
  for (const trace::Event& e : events) model_.add(e);
  label_ = step_ = 0;
  return !model_.empty();
}

bool ExpertsPanel::select(const std::string& label, int step) {
  step_ = step;
  if (label.empty()) return true;
  const auto& labels = model_.labels();
  const auto it = std::find(labels.begin(), labels.end(), label);
  if (it == labels.end()) return false;
  label_ = static_cast<int>(it - labels.begin());
  return true;
}

void ExpertsPanel::draw() {
  layout_ = ExpertsFrameLayout{};
  ImGui::TextUnformatted("Tokens per expert, step by step: what each expert kept, and what its capacity dropped");
  if (model_.empty()) {
    ImGui::Spacing();
    ImGui::TextColored(ImVec4(0.6f, 0.62f, 0.68f, 1.0f),
                       "No experts counters. Open a trace of lesson 16 or of the capstone with --experts "
                       "(counters named \"experts LABEL\"):\n  distlab-viz --panel experts --trace FILE");
    return;
  }
  const auto& labels = model_.labels();
  label_ = std::clamp(label_, 0, static_cast<int>(labels.size()) - 1);
  const std::string& label = labels[static_cast<size_t>(label_)];
  const std::vector<ExpertStep>& steps = model_.steps(label);
  step_ = std::clamp(step_, 0, static_cast<int>(steps.size()) - 1);

  ImGui::SetNextItemWidth(180.0f * scale_);
  if (ImGui::BeginCombo("##label", label.c_str())) {
    for (size_t i = 0; i < labels.size(); ++i)
      if (ImGui::Selectable(labels[i].c_str(), static_cast<int>(i) == label_)) label_ = static_cast<int>(i), step_ = 0;
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(320.0f * scale_);
  int shown = step_ + 1;
  if (ImGui::SliderInt("##step", &shown, 1, static_cast<int>(steps.size()), "step %d")) step_ = shown - 1;
  const ExpertStep& step = steps[static_cast<size_t>(step_)];
  ImGui::SameLine();
  char capacity[64];
  if (step.capacity < 0)
    std::snprintf(capacity, sizeof capacity, "dropless");
  else
    std::snprintf(capacity, sizeof capacity, "capacity %lld per forward", static_cast<long long>(step.capacity));
  ImGui::Text("of %zu   %s   %d rank(s)", steps.size(), capacity, step.ranks);

  const int64_t kept = step.kept_total(), dropped = step.dropped_total();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  draw_chart(step, std::max<int64_t>(1, model_.largest(label)), ImVec2(avail.x, avail.y - ImGui::GetFrameHeightWithSpacing()));
  const double share = kept + dropped > 0 ? 100.0 * double(dropped) / double(kept + dropped) : 0.0;
  ImGui::Text("kept %lld of %lld assignments, dropped %lld (%.1f %%)", static_cast<long long>(kept),
              static_cast<long long>(kept + dropped), static_cast<long long>(dropped), share);
  layout_.drawn = true;
  layout_.label = label;
  layout_.step = step_;
}

void ExpertsPanel::draw_chart(const ExpertStep& step, int64_t full, ImVec2 size) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  size.y = std::max(size.y, 120.0f * scale_);
  size.x = std::max(size.x, 200.0f);
  ImGui::InvisibleButton("experts chart", size);
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float label_h = ImGui::GetTextLineHeightWithSpacing();
  const float top = origin.y + ImGui::GetTextLineHeight(), bottom = origin.y + size.y - label_h;
  const size_t E = step.kept.size();
  layout_.chart_top = top;
  layout_.chart_bottom = bottom;
  layout_.full = full;
  if (E == 0) return;
  const float gap = kBarGap * scale_;
  const float width = std::min(kMaxBarWidth * scale_, (size.x - gap * float(E + 1)) / float(E));
  const auto y_of = [&](int64_t v) { return bottom - (bottom - top) * float(v) / float(full); };
  d->AddLine(ImVec2(origin.x, bottom), ImVec2(origin.x + size.x, bottom), kGridColor);
  // The even share: every assignment of the step spread over the E experts.
  const int64_t even = (step.kept_total() + step.dropped_total()) / int64_t(E);
  const float even_y = y_of(even);
  for (float x = origin.x; x < origin.x + gap * float(E + 1) + width * float(E); x += 12.0f * scale_)
    d->AddLine(ImVec2(x, even_y), ImVec2(x + 6.0f * scale_, even_y), kDimTextColor);
  for (size_t e = 0; e < E; ++e) {
    ExpertBar bar;
    bar.expert = static_cast<int>(e);
    bar.kept = step.kept[e];
    bar.dropped = e < step.dropped.size() ? step.dropped[e] : 0;
    bar.x0 = origin.x + gap + float(e) * (width + gap);
    bar.x1 = bar.x0 + width;
    bar.kept_top = y_of(bar.kept);
    bar.dropped_top = y_of(bar.kept + bar.dropped);
    d->AddRectFilled(ImVec2(bar.x0, bar.kept_top), ImVec2(bar.x1, bottom), kExpertKeptColor);
    if (bar.dropped > 0)
      d->AddRectFilled(ImVec2(bar.x0, bar.dropped_top), ImVec2(bar.x1, bar.kept_top), kExpertDroppedColor);
    const std::string name = "e" + std::to_string(e);
    d->AddText(ImVec2(bar.x0 + (width - ImGui::CalcTextSize(name.c_str()).x) * 0.5f, bottom + 2.0f), kTextColor,
               name.c_str());
    if (ImGui::IsItemHovered() && ImGui::GetIO().MousePos.x >= bar.x0 && ImGui::GetIO().MousePos.x < bar.x1)
      ImGui::SetTooltip("expert %zu: kept %lld, dropped %lld", e, static_cast<long long>(bar.kept),
                        static_cast<long long>(bar.dropped));
    layout_.bars.push_back(bar);
  }
  const float legend_x = origin.x + gap * float(E + 1) + width * float(E) + 24.0f * scale_;
  const float box = ImGui::GetFontSize() * 0.8f;
  d->AddRectFilled(ImVec2(legend_x, top), ImVec2(legend_x + box, top + box), kExpertKeptColor);
  d->AddText(ImVec2(legend_x + box + 6, top - 2), kTextColor, "kept");
  d->AddRectFilled(ImVec2(legend_x, top + 2 * box), ImVec2(legend_x + box, top + 3 * box), kExpertDroppedColor);
  d->AddText(ImVec2(legend_x + box + 6, top + 2 * box - 2), kTextColor, "dropped");
  d->AddText(ImVec2(legend_x, top + 4 * box), kDimTextColor, "- - even share");
}

}  // namespace distlab::viz
