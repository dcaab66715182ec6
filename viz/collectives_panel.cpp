#include "collectives_panel.hpp"

#include <imgui.h>

#include "controls.hpp"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace distlab::viz {
namespace {

using collectives::Algorithm;
using collectives::Collective;

constexpr Collective kShownCollectives[] = {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce,
                                           Collective::kAllToAll};

std::vector<Algorithm> parse_algorithm_list(const std::string& text, Collective collective) {
  std::vector<Algorithm> out;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ','))
    if (!name.empty()) out.push_back(collectives::parse_algorithm(name));
  if (out.empty()) {
    out = collectives::algorithms_for(collective);
    if (out.size() > kMaxSideBySide) out.resize(kMaxSideBySide);
  }
  if (out.size() > kMaxSideBySide)
    throw std::invalid_argument("at most " + std::to_string(kMaxSideBySide) + " algorithms side by side, got " +
                                std::to_string(out.size()));
  return out;
}

// One rank of one algorithm's predicted schedule: a box per step in which
// the rank sends (the chunk's colour) or only receives (a darker shade).
class PlanRow : public TimelineRow {
 public:
  PlanRow(const AlgorithmRun& run, int rank, float height) : run_(run), rank_(rank), height_(height) {}
  std::string label() const override { return "rank " + std::to_string(rank_); }
  float height() const override { return height_; }
  void draw(const TimelineContext& ctx) const override {
    for (int k = 0; k < run_.steps(); ++k) {
      const collectives::Transfer* sent = nullptr;
      const collectives::Transfer* received = nullptr;
      for (const collectives::Transfer& t : run_.plan.steps[k].transfers) {
        if (t.src == rank_ && sent == nullptr) sent = &t;
        if (t.dst == rank_ && received == nullptr) received = &t;
      }
      if (sent == nullptr && received == nullptr) continue;
      const float x0 = ctx.axis.x_of(run_.step_begin_s[k]);
      const float x1 = ctx.axis.x_of(run_.step_begin_s[k + 1]);
      const Color fill = sent != nullptr ? chunk_color(sent->chunk) : mix(chunk_color(received->chunk), kCanvasColor, 0.55f);
      const std::string label =
          sent != nullptr ? "to " + std::to_string(sent->dst) : "from " + std::to_string(received->src);
      draw_box(ctx, x0 + 1, x1 - 1, ctx.row_top + 2, ctx.row_bottom - 2, fill, label.c_str());
    }
  }

 private:
  const AlgorithmRun& run_;
  int rank_;
  float height_;
};

// all_to_all: rank r's input (its block for each rank, in that rank's
// colour) over its output (each rank's block to it, in the sender's colour
// once it has arrived), each block as wide as its bytes.
void draw_all_to_all_blocks(ImDrawList* d, const AlgorithmRun& run, const SceneLayout& scene, int state, int r) {
  for (int peer = 0; peer < run.plan.world_size; ++peer) {
    for (const bool output : {false, true}) {
      const auto [lo, hi] = scene.block(run.plan, r, output, peer);
      if (hi.x <= lo.x) continue;  // no elements: nothing to draw
      const BlockOrigin from = run.outputs[state][r][peer];
      const Color fill = !output ? chunk_color(peer) : from.rank < 0 ? kEmptyCellColor : chunk_color(from.rank);
      // A pixel's gap between blocks wide enough to have one.
      d->AddRectFilled(lo, ImVec2(hi.x - lo.x >= 3.0f ? hi.x - 1 : hi.x, hi.y), fill);
    }
  }
}

std::string step_status(const AlgorithmRun& run, int step) {
  if (step < 0) return "before the start";
  if (step >= run.steps()) {
    switch (run.plan.collective) {
      case Collective::kBroadcast: return "done: every rank has the data";
      case Collective::kReduce: return "done: the root has the sum";
      case Collective::kAllReduce: return "done: every rank has the sum";
      case Collective::kReduceScatter: return "done: every rank has its chunk of the sum";
      case Collective::kAllGather: return "done: every rank has every chunk";
      case Collective::kAllToAll: return "done: every rank has its block from every rank";
    }
  }
  return "step " + std::to_string(step + 1) + " of " + std::to_string(run.steps()) + ": " +
         run.plan.steps[step].phase;
}

}  // namespace

void TimeCursor::advance(double dt_wall, double end_s) {
  if (!playing) return;
  time_s += dt_wall * end_s / std::max(0.1, run_wall_s);
  if (time_s >= end_s) {
    time_s = end_s;
    playing = false;
  }
}

CollectivesPanel::CollectivesPanel(const Options& o) : scale_(o.scale) {
  setup_.collective = collectives::parse_collective(o.collective);
  setup_.ranks = o.ranks;
  setup_.bytes = o.bytes;
  setup_.link = collectives::LinkParams{o.alpha, o.beta};
  setup_.uneven = o.uneven;
  algorithms_ = parse_algorithm_list(o.algorithms, setup_.collective);
  rebuild();
  if (o.step >= 0) set_step(o.step);
  if (o.time_s >= 0) set_time(o.time_s);
}

void CollectivesPanel::rebuild() {
  std::vector<AlgorithmRun> runs;
  for (Algorithm a : algorithms_) runs.push_back(make_run(setup_, a));
  runs_ = std::move(runs);
  view_.fit(0.0, end_s());
  view_.scroll_y = 0.0f;
  cursor_.time_s = std::clamp(cursor_.time_s, 0.0, end_s());
}

double CollectivesPanel::end_s() const {
  double end = 0.0;
  for (const AlgorithmRun& run : runs_) end = std::max(end, run.total_s());
  return end;
}

void CollectivesPanel::set_time(double t) { cursor_.time_s = std::clamp(t, 0.0, end_s()); }

void CollectivesPanel::set_step(int k) {
  if (runs_.empty()) return;
  const AlgorithmRun& run = runs_.front();
  if (k >= run.steps())
    set_time(run.total_s());
  else
    set_time(0.5 * (run.step_begin_s[k] + run.step_begin_s[k + 1]));
}

std::vector<double> CollectivesPanel::boundaries() const {
  std::vector<double> all;
  for (const AlgorithmRun& run : runs_) all.insert(all.end(), run.step_begin_s.begin(), run.step_begin_s.end());
  std::sort(all.begin(), all.end());
  return all;
}

void CollectivesPanel::step_forward() {
  const double eps = 1e-9 * std::max(1.0, end_s());
  const std::vector<double> b = boundaries();
  auto it = std::upper_bound(b.begin(), b.end(), cursor_.time_s + eps);
  set_time(it == b.end() ? end_s() : *it);
  cursor_.playing = false;
}

void CollectivesPanel::toggle_play() {
  if (!cursor_.playing && cursor_.time_s >= end_s()) cursor_.time_s = 0.0;  // play again from the start
  cursor_.playing = !cursor_.playing;
}

void CollectivesPanel::step_back() {
  const double eps = 1e-9 * std::max(1.0, end_s());
  const std::vector<double> b = boundaries();
  auto it = std::lower_bound(b.begin(), b.end(), cursor_.time_s - eps);
  set_time(it == b.begin() ? 0.0 : *std::prev(it));
  cursor_.playing = false;
}

void CollectivesPanel::draw() {
  cursor_.advance(ImGui::GetIO().DeltaTime, end_s());
  draw_controls();
  layout_ = CollectivesFrameLayout{};
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float summary_height = ImGui::GetFrameHeightWithSpacing() * (runs_.size() + 1.6f);
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const float width = (avail.x - spacing * (runs_.size() - 1)) / std::max<size_t>(1, runs_.size());
  const ImVec2 column(width, std::max(200.0f, avail.y - summary_height));
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (i > 0) ImGui::SameLine();
    draw_column(i, column);
  }
  draw_summary();
}

void CollectivesPanel::draw_controls() {
  bool changed = false;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  if (ImGui::BeginCombo("collective", collectives::to_string(setup_.collective))) {
    for (Collective c : kShownCollectives)
      if (ImGui::Selectable(collectives::to_string(c), c == setup_.collective) && c != setup_.collective) {
        setup_.collective = c;
        algorithms_ = parse_algorithm_list("", c);
        changed = true;
      }
    ImGui::EndCombo();
  }
  for (Algorithm a : collectives::algorithms_for(setup_.collective)) {
    ImGui::SameLine();
    auto at = std::find(algorithms_.begin(), algorithms_.end(), a);
    bool on = at != algorithms_.end();
    if (ImGui::Checkbox(collectives::to_string(a), &on)) {
      if (!on && algorithms_.size() > 1) {
        algorithms_.erase(at);
        changed = true;
      } else if (on && algorithms_.size() < kMaxSideBySide) {
        // Keep the teaching order whatever order they are ticked in.
        std::vector<Algorithm> ordered;
        for (Algorithm b : collectives::algorithms_for(setup_.collective))
          if (b == a || std::find(algorithms_.begin(), algorithms_.end(), b) != algorithms_.end()) ordered.push_back(b);
        algorithms_ = ordered;
        changed = true;
      }
    }
  }
  if (setup_.collective == Collective::kAllToAll) {
    ImGui::SameLine();
    changed |= ImGui::Checkbox("uneven (all-to-all-v)", &setup_.uneven);
  }
  ImGui::SameLine(0, 20);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  changed |= ImGui::SliderInt("ranks", &setup_.ranks, 2, 16);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  const int64_t min_bytes = 1;
  const int64_t max_bytes = int64_t{1} << 40;
  if (ImGui::InputScalar("bytes", ImGuiDataType_S64, &setup_.bytes, nullptr, nullptr, "%lld")) {
    setup_.bytes = std::clamp(setup_.bytes, min_bytes, max_bytes);
    changed = true;
  }
  ImGui::SameLine();
  ImGui::TextDisabled("(%s)", format_bytes(static_cast<double>(setup_.bytes)).c_str());
  ImGui::SameLine();
  changed |= link_inputs(setup_.link, 6);
  if (setup_.link.beta_s_per_byte > 0.0) {
    ImGui::SameLine();
    ImGui::TextDisabled("(%s/s)", format_bytes(1.0 / setup_.link.beta_s_per_byte).c_str());
  }
  ImGui::SameLine(0, 20);
  if (ImGui::Button("5 MB to 7 friends")) {
    Options preset;
    preset.preset = "friends";
    apply_preset(preset);
    setup_.collective = collectives::parse_collective(preset.collective);
    setup_.ranks = preset.ranks;
    setup_.bytes = preset.bytes;
    setup_.link = collectives::LinkParams{preset.alpha, preset.beta};
    setup_.uneven = false;
    algorithms_ = parse_algorithm_list(preset.algorithms, setup_.collective);
    cursor_.time_s = 0.0;
    changed = true;
  }
  if (changed) rebuild_or_report([&] { rebuild(); }, error_);

  // Transport: the one cursor. Keys too, for a presenter: space plays or
  // pauses, the arrows step (unless a text field has the keyboard).
  if (!ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) toggle_play();
  step_with_arrow_keys([this] { step_back(); }, [this] { step_forward(); });
  if (ImGui::Button("|<")) set_time(0.0);
  ImGui::SameLine();
  if (ImGui::Button("< step")) step_back();
  ImGui::SameLine();
  if (ImGui::Button(cursor_.playing ? "pause" : "play", ImVec2(ImGui::GetFontSize() * 4, 0))) toggle_play();
  ImGui::SameLine();
  if (ImGui::Button("step >")) step_forward();
  ImGui::SameLine();
  if (ImGui::Button(">|")) set_time(end_s());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.45f);
  double t = cursor_.time_s;
  const double zero = 0.0;
  const double end = end_s();
  const std::string shown = "t = " + format_duration(t);
  if (ImGui::SliderScalar("##time", ImGuiDataType_Double, &t, &zero, &end, shown.c_str())) {
    set_time(t);
    cursor_.playing = false;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  float wall = static_cast<float>(cursor_.run_wall_s);
  if (ImGui::SliderFloat("s per run", &wall, 2.0f, 60.0f, "%.0f")) cursor_.run_wall_s = wall;
  if (!error_.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", error_.c_str());
}

void CollectivesPanel::draw_column(size_t index, ImVec2 size) {
  const AlgorithmRun& run = runs_[index];
  CollectivesFrameLayout::Column column;
  ImGui::BeginGroup();
  ImGui::Text("%s: %d steps, %s%s", collectives::to_string(run.plan.algorithm), run.steps(),
              format_duration(run.prediction.total_seconds).c_str(), run.uniform_time ? " (1 s per step shown)" : "");
  const float row_height = kPlanRowHeight * scale_;
  TimelineStyle style;
  style.label_width = 64.0f * scale_;
  style.axis_height *= scale_;
  const float timeline_height = std::min(size.y * 0.42f, style.axis_height + row_height * run.plan.world_size + 6.0f);
  const float scene_height = size.y - timeline_height - ImGui::GetFrameHeightWithSpacing() - 8.0f;
  draw_scene(run, ImVec2(size.x, scene_height), column);

  std::vector<PlanRow> rows;
  for (int r = 0; r < run.plan.world_size; ++r) rows.emplace_back(run, r, row_height);
  std::vector<const TimelineRow*> pointers;
  for (const PlanRow& row : rows) pointers.push_back(&row);
  const std::string id = "plan" + std::to_string(index);
  const TimelineContext ctx = begin_timeline(id.c_str(), view_, pointers, ImVec2(size.x, timeline_height), style);
  draw_time_cursor(ctx, cursor_.time_s);
  end_timeline(ctx);
  if (ctx.clicked) {
    set_time(ctx.clicked_time_s);
    cursor_.playing = false;
  }
  column.axis = ctx.axis;
  column.row_tops = ctx.row_tops;
  ImGui::EndGroup();
  layout_.columns.push_back(std::move(column));
}

void CollectivesPanel::draw_scene(const AlgorithmRun& run, ImVec2 size, CollectivesFrameLayout::Column& out) {
  const ImVec2 min = ImGui::GetCursorScreenPos();
  const ImVec2 max(min.x + size.x, min.y + size.y);
  ImGui::Dummy(size);
  ImDrawList* d = ImGui::GetWindowDrawList();
  d->PushClipRect(min, max, true);
  d->AddRect(min, max, kRowLineColor);
  const SceneLayout scene = layout_scene(run, cursor_.time_s, min, max, scale_);
  const int p = run.plan.world_size;
  const int parts = run.plan.parts;
  const int state = std::clamp(scene.step < 0 ? 0 : scene.step, 0, run.steps());

  // Arrows under the nodes: the shaft, the moving packet, the label.
  for (const SceneArrow& a : scene.arrows) {
    // An integer thickness keeps ImGui on its cheap textured-line path.
    draw_arrow(d, a.from, a.to, a.color, std::round(kArrowThickness * scale_), kArrowHead * scale_);
    d->AddCircleFilled(a.packet, 6.0f * scale_, a.color, 16);
    d->AddText(a.label_at, kTextColor, a.label.c_str());
  }
  const bool rooted = run.plan.collective == Collective::kBroadcast || run.plan.collective == Collective::kReduce;
  for (int r = 0; r < p; ++r) {
    const ImVec2 c = scene.nodes[r];
    d->AddCircleFilled(c, scene.node_radius, rooted && r == run.plan.root ? kNodeRootColor : kNodeColor, 32);
    const std::string name = std::to_string(r);
    const ImVec2 text = ImGui::CalcTextSize(name.c_str());
    d->AddText(ImVec2(c.x - text.x * 0.5f, c.y - text.y * 0.5f), kNodeTextColor, name.c_str());
    if (run.plan.collective == Collective::kAllToAll) {
      draw_all_to_all_blocks(d, run, scene, state, r);
      continue;
    }
    // What the rank holds: a cell per chunk, brighter with more ranks' contributions.
    for (int k = 0; k < parts; ++k) {
      const Contributions have = run.holdings[state][r][k];
      const float share = static_cast<float>(std::bitset<32>(have).count()) / p;
      const Color fill = have == 0 ? kEmptyCellColor
                                   : mix(kEmptyCellColor, chunk_color(parts == 1 ? -1 : k), 0.35f + 0.65f * share);
      const ImVec2 cell = scene.cell(r, k, parts);
      d->AddRectFilled(cell, ImVec2(cell.x + scene.cell_size - 1, cell.y + scene.cell_size - 1), fill);
    }
  }
  if (run.plan.collective == Collective::kAllToAll) {
    const float line = ImGui::GetTextLineHeightWithSpacing();
    d->AddText(ImVec2(min.x + 8, max.y - 2 * line - 4), kDimTextColor, "upper row: input, a block for each rank");
    d->AddText(ImVec2(min.x + 8, max.y - line - 4), kDimTextColor, "lower row: output, a block from each rank");
  }
  const std::string status = step_status(run, scene.step);
  d->AddText(ImVec2(min.x + 8, min.y + 6), kTextColor, status.c_str());
  if (scene.step >= 0 && scene.step < run.steps()) {
    const std::string time = "this step: " + format_duration(run.prediction.step_seconds[scene.step]);
    d->AddText(ImVec2(min.x + 8, min.y + 6 + ImGui::GetTextLineHeightWithSpacing()), kDimTextColor, time.c_str());
  }
  d->PopClipRect();
  out.scene_min = min;
  out.scene_max = max;
  out.scene = scene;
}

void CollectivesPanel::draw_summary() {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("summary", 6, flags)) return;
  for (const char* h : {"algorithm", "steps", "bytes sent per rank (max)", "predicted time", "vs fastest", "busbw"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  double fastest = 0.0;
  for (const AlgorithmRun& run : runs_)
    if (fastest == 0.0 || run.prediction.total_seconds < fastest) fastest = run.prediction.total_seconds;
  for (const AlgorithmRun& run : runs_) {
    const double total = run.prediction.total_seconds;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(collectives::to_string(run.plan.algorithm));
    ImGui::TableNextColumn();
    ImGui::Text("%d", run.steps());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(static_cast<double>(run.prediction.max_bytes_sent_per_rank)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(total).c_str());
    ImGui::TableNextColumn();
    if (fastest > 0.0)
      ImGui::Text("%.2fx", total / fastest);
    else
      ImGui::TextDisabled("-");
    ImGui::TableNextColumn();
    if (total > 0.0) {
      // The bytes of one rank's buffer (all-to-all: the largest input).
      const double bytes = static_cast<double>(run.plan.count) * run.plan.elem_bytes;
      const double busbw = bytes / total *
                           collectives::bus_bandwidth_factor(run.plan.collective, run.plan.world_size);
      ImGui::Text("%s/s", format_bytes(busbw).c_str());
    } else {
      ImGui::TextDisabled("-");
    }
  }
  ImGui::EndTable();
}

}  // namespace distlab::viz
