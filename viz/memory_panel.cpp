#include "memory_panel.hpp"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "timeline.hpp"

namespace distlab::viz {
namespace {

// Parameters blue, gradients orange, optimizer state green, buffers purple,
// activations red: far apart, and readable on the dark canvas.
constexpr std::array<Color, kMemorySeriesCount> kSeriesColors = {
    rgb(66, 133, 244), rgb(251, 140, 0), rgb(67, 160, 71), rgb(171, 71, 188), rgb(229, 57, 53)};

constexpr float kAxisWidth = 80.0f;    // the byte labels left of the chart, at scale 1
constexpr float kMaxBarWidth = 48.0f;
constexpr float kBarGap = 2.0f;        // between a measured bar and its formula
constexpr float kRankGap = 10.0f;      // between two ranks' pairs
constexpr float kStageGap = 36.0f;     // between two stages

// Grid spacing: 1, 2 or 5 times a power of ten, about `target` bytes.
double nice_step(double target) {
  const double p = std::pow(10.0, std::floor(std::log10(target)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= target) return m * p;
  return 10.0 * p;
}

std::string stage_label(const std::string& stage) { return stage.empty() ? "memory" : stage; }

}  // namespace

Color memory_series_color(int series) { return kSeriesColors[static_cast<size_t>(series)]; }
Color memory_formula_color(int series) { return mix(memory_series_color(series), kCanvasColor, 0.55f); }

void MemoryPanel::draw(const MemoryModel& memory, int64_t origin_us) {
  layout_ = MemoryFrameLayout{};
  ImGui::TextUnformatted(
      "Memory per rank: the measured peak (solid) beside the accounting (pale: the ZeRO paper's, or the lesson's "
      "formula)");
  draw_legend();
  if (memory.empty()) {
    ImGui::Spacing();
    ImGui::TextColored(ImVec4(0.6f, 0.62f, 0.68f, 1.0f),
                       "No memory samples. Open a trace of a DDP or ZeRO run (counters named \"memory STAGE\" and "
                       "\"accounting STAGE\"):\n  distlab-viz --panel memory --trace FILE\nor listen for one in the "
                       "Trace panel.");
    return;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float table_height = std::min(avail.y * 0.3f, (2.0f + static_cast<float>(memory.stages().size())) *
                                                          ImGui::GetFrameHeightWithSpacing());
  draw_chart(memory, ImVec2(avail.x, avail.y - table_height));
  if (hovered_ >= 0 && !ImGui::IsMouseDragging(ImGuiMouseButton_Left))
    draw_tooltip(layout_.bars[static_cast<size_t>(hovered_)], memory, origin_us);
  draw_table(memory);
}

void MemoryPanel::draw_legend() {
  const float box = ImGui::GetFontSize() * 0.8f;
  for (int s = 0; s < kMemorySeriesCount; ++s) {
    if (s > 0) ImGui::SameLine(0, 18.0f * scale_);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float dy = (ImGui::GetTextLineHeight() - box) * 0.5f;
    ImDrawList* d = ImGui::GetWindowDrawList();
    d->AddRectFilled(ImVec2(at.x, at.y + dy), ImVec2(at.x + box, at.y + dy + box), memory_series_color(s));
    d->AddRectFilled(ImVec2(at.x + box + 2, at.y + dy), ImVec2(at.x + 2 * box + 2, at.y + dy + box),
                     memory_formula_color(s));
    ImGui::Dummy(ImVec2(2 * box + 6, ImGui::GetTextLineHeight()));
    ImGui::SameLine(0, 0);
    ImGui::TextUnformatted(kMemorySeries[static_cast<size_t>(s)]);
  }
}

void MemoryPanel::draw_chart(const MemoryModel& memory, ImVec2 size) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  size.y = std::max(size.y, 120.0f * scale_);
  ImGui::InvisibleButton("memory chart", ImVec2(std::max(size.x, 200.0f), size.y));
  const bool chart_hovered = ImGui::IsItemHovered();
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();

  // Bars from `left` to `right`, 0 bytes at `bottom` (two lines of labels
  // under it: ranks, then stages), full scale at `top`.
  const float left = origin.x + kAxisWidth * scale_;
  const float right = origin.x + size.x - 8.0f * scale_;
  const float top = origin.y + line;
  const float bottom = origin.y + size.y - 2.5f * line;
  layout_.drawn = true;
  layout_.chart_top = top;
  layout_.chart_bottom = bottom;
  layout_.full_bytes = std::max<int64_t>(1, memory.max_bar_total());
  const double full = static_cast<double>(layout_.full_bytes);
  auto y_of = [&](int64_t bytes) {
    return bottom - static_cast<float>(static_cast<double>(bytes) / full) * (bottom - top);
  };

  // Grid lines and their bytes.
  const double step = nice_step(full / 5.0);
  for (double b = 0.0; b <= full * 1.0001; b += step) {
    const float y = std::floor(y_of(static_cast<int64_t>(b))) + 0.5f;
    d->AddLine(ImVec2(left - 4, y), ImVec2(right, y), b == 0.0 ? kGridColor : (kGridColor & 0x60FFFFFFu));
    const std::string text = format_bytes(b);
    const float w = ImGui::CalcTextSize(text.c_str()).x;
    d->AddText(ImVec2(left - 8 - w, y - line * 0.5f), kDimTextColor, text.c_str());
  }

  // Stage groups share the width by their number of ranks.
  const std::vector<std::string> stages = memory.stages();
  size_t slots = 0;
  for (const std::string& stage : stages) slots += std::max<size_t>(1, memory.ranks_of(stage).size());
  const float gaps = kStageGap * scale_ * static_cast<float>(stages.size() - 1) +
                     kRankGap * scale_ * static_cast<float>(slots - stages.size());
  const float slot = std::max(4.0f, (right - left - gaps) / static_cast<float>(std::max<size_t>(1, slots)));
  const float bar = std::min(kMaxBarWidth * scale_, (slot - kBarGap) * 0.5f);
  float x = left;
  hovered_ = -1;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (size_t g = 0; g < stages.size(); ++g) {
    const std::string& stage = stages[g];
    const float group_left = x;
    for (int rank : memory.ranks_of(stage)) {
      const float pair_left = x + (slot - 2 * bar - kBarGap) * 0.5f;
      for (MemoryKind kind : {MemoryKind::kMeasured, MemoryKind::kAccounting}) {
        const std::optional<MemorySample> sample =
            kind == MemoryKind::kMeasured ? memory.peak(stage, rank) : memory.accounting(stage, rank);
        if (!sample) continue;
        MemoryBar b;
        b.stage = stage;
        b.rank = rank;
        b.kind = kind;
        b.sample = *sample;
        b.x0 = kind == MemoryKind::kMeasured ? pair_left : pair_left + bar + kBarGap;
        b.x1 = b.x0 + bar;
        // Each edge from the running sum, so the stack never drifts from its total.
        int64_t below = 0;
        for (int s = 0; s < kMemorySeriesCount; ++s) {
          b.segment_bottom[s] = y_of(below);
          below += std::max<int64_t>(0, sample->bytes[s]);
          b.segment_top[s] = y_of(below);
          if (b.segment_top[s] < b.segment_bottom[s])
            d->AddRectFilled(ImVec2(b.x0, b.segment_top[s]), ImVec2(b.x1, b.segment_bottom[s]),
                             kind == MemoryKind::kMeasured ? memory_series_color(s) : memory_formula_color(s));
        }
        if (chart_hovered && mouse.x >= b.x0 && mouse.x < b.x1 && mouse.y >= top && mouse.y <= bottom)
          hovered_ = static_cast<int>(layout_.bars.size());
        layout_.bars.push_back(std::move(b));
      }
      const std::string label = "r" + std::to_string(rank);
      const float w = ImGui::CalcTextSize(label.c_str()).x;
      d->AddText(ImVec2(x + (slot - w) * 0.5f, bottom + 3), kDimTextColor, label.c_str());
      x += slot + kRankGap * scale_;
    }
    if (memory.ranks_of(stage).empty()) x += slot + kRankGap * scale_;
    const float group_right = x - kRankGap * scale_;
    const std::string name = stage_label(stage);
    const float w = ImGui::CalcTextSize(name.c_str()).x;
    d->AddText(ImVec2((group_left + group_right - w) * 0.5f, bottom + 3 + line), kTextColor, name.c_str());
    x = group_right + kStageGap * scale_;
  }
}

void MemoryPanel::draw_tooltip(const MemoryBar& bar, const MemoryModel& memory, int64_t origin_us) const {
  ImGui::BeginTooltip();
  const bool measured = bar.kind == MemoryKind::kMeasured;
  ImGui::Text("%s, rank %d: %s", stage_label(bar.stage).c_str(), bar.rank,
              measured ? "measured peak" : "the accounting (the ZeRO paper's, or the lesson's formula)");
  ImGui::Separator();
  for (int s = kMemorySeriesCount - 1; s >= 0; --s)
    ImGui::Text("%-16s %s", kMemorySeries[static_cast<size_t>(s)],
                format_bytes(static_cast<double>(bar.sample.bytes[s])).c_str());
  ImGui::Text("%-16s %s", "total", format_bytes(static_cast<double>(bar.sample.total())).c_str());
  if (measured) {
    ImGui::Text("sampled at %s, the largest of %zu samples",
                format_duration(static_cast<double>(bar.sample.at_us - origin_us) * 1e-6).c_str(),
                memory.measured_count(bar.stage, bar.rank));
    if (const auto formula = memory.accounting(bar.stage, bar.rank); formula && formula->total() > 0)
      ImGui::Text("%.2fx the accounting (%s)",
                  static_cast<double>(bar.sample.total()) / static_cast<double>(formula->total()),
                  format_bytes(static_cast<double>(formula->total())).c_str());
  }
  ImGui::EndTooltip();
}

void MemoryPanel::draw_table(const MemoryModel& memory) {
  const std::vector<std::string> stages = memory.stages();
  std::set<int> rank_set;
  for (const std::string& stage : stages)
    for (int rank : memory.ranks_of(stage)) rank_set.insert(rank);
  const std::vector<int> ranks(rank_set.begin(), rank_set.end());
  const int columns = 1 + static_cast<int>(std::min<size_t>(ranks.size(), 63));
  const ImGuiTableFlags flags = ImGuiTableFlags_BordersV | ImGuiTableFlags_BordersOuterH | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("memory totals", columns, flags, ImGui::GetContentRegionAvail())) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("stage: measured peak / accounting");
  for (int c = 1; c < columns; ++c) ImGui::TableSetupColumn(("rank " + std::to_string(ranks[c - 1])).c_str());
  ImGui::TableHeadersRow();
  auto bytes_of = [](const std::optional<MemorySample>& s) {
    return s ? format_bytes(static_cast<double>(s->total())) : std::string("-");
  };
  for (const std::string& stage : stages) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(stage_label(stage).c_str());
    for (int c = 1; c < columns; ++c) {
      ImGui::TableNextColumn();
      const int rank = ranks[c - 1];
      ImGui::Text("%s / %s", bytes_of(memory.peak(stage, rank)).c_str(),
                  bytes_of(memory.accounting(stage, rank)).c_str());
    }
  }
  ImGui::EndTable();
}

}  // namespace distlab::viz
