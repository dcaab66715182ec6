// The Context parallel panel (see context_panel.hpp): the controls, the two
// layouts' attention matrices and their pairs per rank.
#include "context_panel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "controls.hpp"

namespace distlab::viz {
namespace {

using context_parallel::BlockWork;
using context_parallel::Cover;
using context_parallel::Layout;

constexpr Layout kLayouts[] = {Layout::kContiguous, Layout::kZigzag};

std::string layout_title(const RingView& view) {
  const std::string chunks =
      std::to_string(view.chunks) + " chunks of " + format_count(view.plan.chunk) + " tokens";
  if (view.plan.layout == Layout::kContiguous) return "contiguous: " + chunks + ", rank r holds chunk r";
  return "zigzag: " + chunks + ", rank r holds chunks r and " + std::to_string(view.chunks - 1) + " - r";
}

}  // namespace

ContextPanel::ContextPanel(const Options& o)
    : ranks_(std::clamp(o.cp_ranks, 1, kMaxContextRanks)), wanted_length_(std::max<int64_t>(1, o.cp_length)),
      scale_(o.scale) {
  rebuild();
  set_step(o.cp_step);
}

void ContextPanel::rebuild() {
  const int64_t length = ring_length(ranks_, wanted_length_);
  std::vector<RingView> views;
  for (Layout layout : kLayouts) views.push_back(make_ring_view(layout, ranks_, length, causal_));
  views_ = std::move(views);
  step_ = std::min(step_, ranks_ - 1);
}

void ContextPanel::set_ranks(int ranks) {
  ranks_ = std::clamp(ranks, 1, kMaxContextRanks);
  rebuild();
}

void ContextPanel::set_length(int64_t tokens) {
  wanted_length_ = std::max<int64_t>(1, tokens);
  rebuild();
}

void ContextPanel::set_causal(bool causal) {
  causal_ = causal;
  rebuild();
}

void ContextPanel::set_step(int step) { step_ = std::clamp(step, -1, ranks_ - 1); }
void ContextPanel::step_forward() { set_step(step_ + 1); }
void ContextPanel::step_back() { set_step(step_ - 1); }

void ContextPanel::draw() {
  draw_controls();
  layout_ = ContextFrameLayout{};
  // One scale for the bars of both layouts: the most pairs any rank computes.
  int64_t most = 0;
  for (const RingView& view : views_)
    for (int64_t pairs : view.rank_pairs) most = std::max(most, pairs);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const ImVec2 column((avail.x - spacing) / 2, std::max(200.0f, avail.y));
  for (size_t i = 0; i < views_.size(); ++i) {
    if (i > 0) ImGui::SameLine();
    draw_view(i, column, most);
  }
}

void ContextPanel::draw_controls() {
  bool changed = false;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  changed |= ImGui::SliderInt("ranks C", &ranks_, 1, kMaxContextRanks);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  if (ImGui::InputScalar("tokens S", ImGuiDataType_S64, &wanted_length_, nullptr, nullptr, "%lld")) {
    wanted_length_ = std::clamp<int64_t>(wanted_length_, 1, int64_t{1} << 24);
    changed = true;
  }
  ImGui::SameLine();
  changed |= ImGui::Checkbox("causal", &causal_);
  if (changed) {
    ranks_ = std::clamp(ranks_, 1, kMaxContextRanks);
    rebuild_or_report([&] { rebuild(); }, error_);
  }
  if (length() != wanted_length_) {
    ImGui::SameLine();
    ImGui::TextDisabled("(S = %lld: a multiple of 2C = %d)", static_cast<long long>(length()), 2 * ranks_);
  }

  // The step: buttons, the slider, and the arrow keys as in the Collectives panel.
  step_with_arrow_keys([this] { step_back(); }, [this] { step_forward(); });
  if (ImGui::Button("every step")) set_step(-1);
  ImGui::SameLine();
  if (ImGui::Button("< step")) step_back();
  ImGui::SameLine();
  if (ImGui::Button("step >")) step_forward();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
  const std::string shown =
      step_ < 0 ? "every step" : "ring step " + std::to_string(step_) + " (0 to " + std::to_string(ranks_ - 1) + ")";
  int step = step_;
  if (ImGui::SliderInt("##step", &step, -1, ranks_ - 1, shown.c_str())) set_step(step);
  ImGui::SameLine();
  if (step_ < 0)
    ImGui::TextDisabled("each block in the colour of the rank that computes it; grey: skipped (keys after queries)");
  else
    ImGui::TextDisabled("at step %d rank r computes its queries against the keys of rank (r - %d) mod %d", step_,
                        step_, ranks_);
  if (!error_.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", error_.c_str());
}

void ContextPanel::draw_view(size_t index, ImVec2 size, int64_t most_pairs) {
  const RingView& view = views_[index];
  ContextFrameLayout::View out;
  ImGui::BeginGroup();
  ImGui::TextUnformatted(layout_title(view).c_str());
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float labels = ImGui::CalcTextSize("q15").x + 6.0f * scale_;  // chunk numbers left of rows, above columns
  const float list_height = line * (view.plan.ranks + 1.5f);
  const float side =
      std::max(40.0f, std::min(size.x - labels - 8.0f, size.y - line - labels - list_height - 12.0f));
  const ImVec2 at = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(size.x, labels + side + 8.0f));
  // Whole pixels, so that the blocks and their outlines fall on pixels.
  const float left = std::floor(at.x + std::max(0.0f, (size.x - labels - side) * 0.5f) + labels);
  draw_matrix(view, ImVec2(left, std::floor(at.y + labels)), side, out);

  // The pairs per rank, as numbers and as bars on one scale for both views.
  ImDrawList* d = ImGui::GetWindowDrawList();
  const ImVec2 list = ImGui::GetCursorScreenPos();
  std::vector<std::string> lines;
  float text_width = 0.0f;
  for (int r = 0; r < view.plan.ranks; ++r) {
    std::string text = "rank " + std::to_string(r) + ": " + format_count(view.rank_pairs[r]) + " pairs";
    if (step_ >= 0) text += " (this step " + format_count(view.plan.pairs(r, step_)) + ")";
    text_width = std::max(text_width, ImGui::CalcTextSize(text.c_str()).x);
    lines.push_back(std::move(text));
  }
  const float bar_left = list.x + text_width + 10.0f * scale_;
  const float bar_room = std::max(10.0f, list.x + size.x - bar_left - 4.0f);
  for (int r = 0; r < view.plan.ranks; ++r) {
    const float y = list.y + r * line;
    d->AddText(ImVec2(list.x, y), kTextColor, lines[r].c_str());
    const float share = most_pairs > 0 ? static_cast<float>(view.rank_pairs[r]) / most_pairs : 0.0f;
    const ImVec2 lo(bar_left, y + 2.0f);
    const ImVec2 hi(bar_left + std::round(bar_room * share), y + line - 4.0f);
    if (hi.x > lo.x) d->AddRectFilled(lo, hi, rank_color(r));
    out.bar_min.push_back(lo);
    out.bar_max.push_back(hi);
  }
  ImGui::Dummy(ImVec2(size.x, line * view.plan.ranks));
  char summary[160];
  std::snprintf(summary, sizeof summary, "busiest rank / mean: %.2fx (the ring waits for the busiest)",
                view.imbalance());
  ImGui::TextUnformatted(summary);
  ImGui::EndGroup();
  layout_.views.push_back(std::move(out));
}

void ContextPanel::draw_matrix(const RingView& view, ImVec2 min, float side, ContextFrameLayout::View& out) {
  ImDrawList* d = ImGui::GetWindowDrawList();
  const RingMatrix m{min, std::floor(side / view.chunks), view.chunks};
  out.matrix = m;
  // Chunk numbers when they fit: queries down the left, keys along the top.
  const float text_height = ImGui::GetTextLineHeight();
  for (int c = 0; c < m.chunks && m.cell >= text_height + 2.0f; ++c) {
    const std::string q = "q" + std::to_string(c);
    const std::string k = "k" + std::to_string(c);
    const ImVec2 row = m.cell_min(c, 0);
    const ImVec2 q_size = ImGui::CalcTextSize(q.c_str());
    d->AddText(ImVec2(row.x - q_size.x - 4.0f, row.y + (m.cell - text_height) * 0.5f), kDimTextColor, q.c_str());
    const ImVec2 column = m.cell_min(0, c);
    const ImVec2 k_size = ImGui::CalcTextSize(k.c_str());
    if (k_size.x + 2.0f <= m.cell)
      d->AddText(ImVec2(column.x + (m.cell - k_size.x) * 0.5f, column.y - text_height - 2.0f), kDimTextColor,
                 k.c_str());
  }
  // The blocks, a pixel apart; a diagonal block is its lower triangle (keys
  // up to the query) over the grey of the masked part.
  const float outline = std::max(2.0f, std::round(2.0f * scale_));
  for (int q = 0; q < m.chunks; ++q) {
    for (int k = 0; k < m.chunks; ++k) {
      const BlockWork& b = view.block(q, k);
      const ImVec2 lo = m.cell_min(q, k);
      const ImVec2 hi(lo.x + m.cell - 1.0f, lo.y + m.cell - 1.0f);
      const Color fill = block_fill(b, step_);
      if (b.cover == Cover::kDiagonal) {
        d->AddRectFilled(lo, hi, kSkippedBlockColor);
        d->AddTriangleFilled(lo, hi, ImVec2(lo.x, hi.y), fill);  // clockwise on the screen
      } else {
        d->AddRectFilled(lo, hi, fill);
      }
      if (highlighted(b, step_)) {
        out.highlighted.push_back(view.grid[static_cast<size_t>(q) * m.chunks + k]);
        const float inset = outline * 0.5f;
        d->AddRect(ImVec2(lo.x + inset, lo.y + inset), ImVec2(hi.x - inset, hi.y - inset), kStepOutlineColor, 0.0f, 0,
                   outline);
      }
    }
  }
}

}  // namespace distlab::viz
