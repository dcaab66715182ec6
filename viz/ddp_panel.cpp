#include "ddp_panel.hpp"

#include <imgui.h>

#include "controls.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

namespace distlab::viz {
namespace {

constexpr float kMinCapMb = 1.0f / 16.0f;
constexpr float kMaxCapMb = 512.0f;

int64_t mib_to_bytes(double mb) { return static_cast<int64_t>(mb * static_cast<double>(ddp::kMiB)); }

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", fraction * 100.0);
  return text;
}

void labelled_box(const TimelineContext& ctx, double begin, double end, Color fill, const std::string& label,
                  Color text = rgb(16, 16, 16)) {
  const float x0 = ctx.axis.x_of(begin), x1 = ctx.axis.x_of(end);
  if (x1 < ctx.area_min.x || x0 > ctx.area_max.x) return;
  draw_box(ctx, x0 + 0.5f, x1 - 0.5f, ctx.row_top + 2, ctx.row_bottom - 2, fill, nullptr);
  if (label.empty()) return;
  const ImVec2 size = ImGui::CalcTextSize(label.c_str());
  if (x1 - x0 < size.x + 4.0f) return;
  ctx.draw->AddText(ImVec2((x0 + x1 - size.x) * 0.5f, (ctx.row_top + ctx.row_bottom - size.y) * 0.5f), text,
                    label.c_str());
}

// The compute stream of a step: micro-steps, forward, each gradient,
// the wait for the buckets, the optimizer.
class ComputeRow : public TimelineRow {
 public:
  ComputeRow(const DdpStep& step, const ddp::BucketPlan& plan, std::string label, float height)
      : step_(step), plan_(plan), label_(std::move(label)), height_(height) {}
  std::string label() const override { return label_; }
  float height() const override { return height_; }
  void draw(const TimelineContext& ctx) const override {
    for (size_t k = 0; k < step_.local_forward.size(); ++k) {
      labelled_box(ctx, step_.local_forward[k].begin_s, step_.local_forward[k].end_s, category_color("fwd"), "fwd");
      labelled_box(ctx, step_.local_backward[k].begin_s, step_.local_backward[k].end_s, category_color("bwd"),
                   "bwd (no_sync)");
    }
    if (step_.forward.end_s > step_.forward.begin_s)
      labelled_box(ctx, step_.forward.begin_s, step_.forward.end_s, category_color("fwd"), "forward");
    for (const DdpStep::Grad& g : step_.grads) {
      const std::string& name =
          g.param >= 0 && g.param < static_cast<int>(plan_.params.size()) ? plan_.params[g.param].name : std::string();
      labelled_box(ctx, g.begin_s, g.end_s, bucket_color(std::max(0, g.bucket)), name);
    }
    if (step_.wait.end_s > step_.wait.begin_s)
      labelled_box(ctx, step_.wait.begin_s, step_.wait.end_s, kWaitColor, "wait", kTextColor);
    if (step_.optimizer.end_s > step_.optimizer.begin_s)
      labelled_box(ctx, step_.optimizer.begin_s, step_.optimizer.end_s, category_color("optimizer"), "optimizer");
  }

 private:
  const DdpStep& step_;
  const ddp::BucketPlan& plan_;
  std::string label_;
  float height_;
};

// The communication stream: each bucket's all-reduce.
class AllReduceRow : public TimelineRow {
 public:
  AllReduceRow(const DdpStep& step, std::string label, float height)
      : step_(step), label_(std::move(label)), height_(height) {}
  std::string label() const override { return label_; }
  float height() const override { return height_; }
  void draw(const TimelineContext& ctx) const override {
    for (const DdpStep::AllReduce& a : step_.all_reduces)
      labelled_box(ctx, a.begin_s, a.end_s, bucket_color(std::max(0, a.bucket)), "b" + std::to_string(a.bucket));
  }

 private:
  const DdpStep& step_;
  std::string label_;
  float height_;
};

}  // namespace

std::vector<StripCell> layout_strip(const ddp::BucketPlan& plan, float width) {
  std::vector<StripCell> cells;
  int64_t total = 0;
  for (const ddp::Bucket& b : plan.buckets) total += b.bytes;
  const float gaps = kBucketGap * static_cast<float>(std::max<size_t>(1, plan.buckets.size()) - 1);
  const float usable = std::max(1.0f, width - gaps);
  float x = 0.0f;
  int64_t before = 0;  // bytes placed so far: positions from the running sum, so rounding never drifts
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    if (b > 0) x += kBucketGap;
    for (int i : plan.buckets[b].params) {
      const float x0 = x + usable * static_cast<float>(before) / std::max<int64_t>(1, total);
      before += plan.params[i].bytes();
      const float x1 = x + usable * static_cast<float>(before) / std::max<int64_t>(1, total);
      cells.push_back({i, static_cast<int>(b), x0, std::max(x1, x0 + 1.0f)});
    }
  }
  return cells;
}

DdpPanel::DdpPanel(const Options& o)
    : preset_(o.model), bucket_mb_(o.bucket_mb), first_bucket_mb_(o.first_bucket_mb), scale_(o.scale) {
  model_ = o.layers.empty() ? preset_model(o.model) : model_of_sizes(o.layers);
  costs_.ranks = o.ranks;
  costs_.link = {o.alpha, o.beta};
  costs_.backward_bytes_per_s = o.backward_gbps * 1e9;
  costs_.no_sync_steps = o.no_sync;
  rebuild();
}

void DdpPanel::set_bucket_mb(double mb) {
  bucket_mb_ = mb;
  plans_from_trace_ = false;
  rebuild();
}

void DdpPanel::rebuild() {
  const int n = static_cast<int>(model_.params.size());
  if (!plans_from_trace_) {
    before_ = ddp::plan_buckets(model_.params, ddp::reverse_registration_order(n), mib_to_bytes(first_bucket_mb_),
                                mib_to_bytes(bucket_mb_));
    after_ = ddp::plan_buckets(model_.params, model_.ready_order, mib_to_bytes(first_bucket_mb_),
                               mib_to_bytes(bucket_mb_));
  }
  first_step_ = simulate_ddp_step(before_, model_.ready_order, costs_);
  rebuilt_step_ = simulate_ddp_step(after_, model_.ready_order, costs_);
  // The rebuilt plan's step time for caps from 1/16 MiB to 512 MiB.
  step_ms_by_cap_.clear();
  for (float mb = kMinCapMb; mb <= kMaxCapMb * 1.001f; mb *= 2.0f) {
    const ddp::BucketPlan plan = ddp::plan_buckets(model_.params, model_.ready_order, mib_to_bytes(first_bucket_mb_),
                                                   mib_to_bytes(mb));
    step_ms_by_cap_.push_back(static_cast<float>(simulate_ddp_step(plan, model_.ready_order, costs_).step_s * 1e3));
  }
  view_.fit(0.0, std::max(first_step_.step_s, rebuilt_step_.step_s));
}

bool DdpPanel::set_trace(const std::vector<trace::Event>& events) {
  std::optional<MeasuredDdp> found = measure_ddp_trace(events);
  if (!found) return false;
  trace_events_ = events;
  show(std::move(*found));
  return true;
}

void DdpPanel::show_instance(int instance) {
  if (trace_events_.empty()) return;
  if (std::optional<MeasuredDdp> found = measure_ddp_trace(trace_events_, 0, -1, instance)) show(std::move(*found));
}

void DdpPanel::show(MeasuredDdp measured) {
  measured_ = std::move(measured);
  model_ = measured_->model;
  before_ = measured_->before;
  after_ = measured_->after ? *measured_->after : measured_->before;
  plans_from_trace_ = true;
  rebuild();
  measured_view_.fit(0.0, std::max(1e-6, measured_->measured.step_s));
}

void DdpPanel::draw() {
  layout_ = DdpFrameLayout{};
  draw_controls();
  layout_.before = draw_strip("before the rebuild: reverse registration order", before_);
  layout_.after = draw_strip("after the rebuild: the order gradients became ready", after_);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float summary_height = ImGui::GetFrameHeightWithSpacing() * (measured_ ? 4.6f : 3.6f);
  const float measured_height = measured_ ? std::min(avail.y * 0.3f, 22.0f * scale_ + kDdpRowHeight * scale_ * 2 + 30.0f) : 0.0f;
  draw_steps(ImVec2(avail.x, std::max(120.0f, avail.y - summary_height - measured_height)));
  if (measured_) draw_measured(ImVec2(avail.x, measured_height));
  draw_summary();
}

void DdpPanel::draw_controls() {
  bool changed = false;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  const char* shown = measured_ && plans_from_trace_ ? "from the trace" : model_.name.c_str();
  if (ImGui::BeginCombo("model", shown)) {
    for (const char* name : {"mlp", "reordered"})
      if (ImGui::Selectable(name, model_.name == name)) {
        model_ = preset_model(name);
        plans_from_trace_ = false;
        changed = true;
      }
    if (measured_ && ImGui::Selectable("from the trace", plans_from_trace_)) {
      model_ = measured_->model;
      before_ = measured_->before;
      after_ = measured_->after ? *measured_->after : measured_->before;
      plans_from_trace_ = true;
      changed = true;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine(0, 16);
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
  float cap = static_cast<float>(bucket_mb_);
  if (ImGui::SliderFloat("bucket cap MiB", &cap, kMinCapMb, kMaxCapMb, "%.3g", ImGuiSliderFlags_Logarithmic)) {
    bucket_mb_ = cap;
    plans_from_trace_ = false;
    changed = true;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 4);
  if (ImGui::InputDouble("first MiB", &first_bucket_mb_, 0.0, 0.0, "%.3g")) {
    first_bucket_mb_ = std::clamp(first_bucket_mb_, 0.0, 1e5);
    plans_from_trace_ = false;
    changed = true;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  changed |= ImGui::SliderInt("ranks", &costs_.ranks, 2, 16);
  ImGui::SameLine();
  changed |= link_inputs(costs_.link, 5);
  ImGui::SameLine();
  double gbps = costs_.backward_bytes_per_s / 1e9;
  if (input_clamped("backward GB/s", gbps, 1e-6, 1e6, 5)) {
    costs_.backward_bytes_per_s = gbps * 1e9;
    changed = true;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  changed |= ImGui::SliderInt("no_sync k", &costs_.no_sync_steps, 0, 8);
  if (changed) rebuild_or_report([&] { rebuild(); }, error_);
  // The model's prediction for every cap, and where the slider is.
  char overlay[96];
  std::snprintf(overlay, sizeof overlay, "step time vs bucket cap (1/16 to 512 MiB): %s at %.3g MiB",
                format_duration(rebuilt_step_.step_s).c_str(), bucket_mb_);
  ImGui::PlotLines("##step by cap", step_ms_by_cap_.data(), static_cast<int>(step_ms_by_cap_.size()), 0, overlay, 0.0f,
                   FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 40.0f * scale_));
  if (!error_.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", error_.c_str());
}

DdpFrameLayout::Strip DdpPanel::draw_strip(const char* title, const ddp::BucketPlan& plan) {
  ImGui::Text("%s: %zu buckets", title, plan.buckets.size());
  DdpFrameLayout::Strip strip;
  strip.min = ImGui::GetCursorScreenPos();
  strip.height = kStripHeight * scale_;
  const float width = ImGui::GetContentRegionAvail().x;
  ImGui::Dummy(ImVec2(width, strip.height + ImGui::GetTextLineHeight()));
  strip.cells = layout_strip(plan, width);
  ImDrawList* d = ImGui::GetWindowDrawList();
  const float y0 = strip.min.y, y1 = strip.min.y + strip.height;
  for (const StripCell& c : strip.cells) {
    d->AddRectFilled(ImVec2(strip.min.x + c.x0, y0), ImVec2(strip.min.x + c.x1, y1), bucket_color(c.bucket));
    // A dark line between neighbours shows where one parameter ends.
    if (c.x1 - c.x0 >= 3.0f) d->AddLine(ImVec2(strip.min.x + c.x1 - 0.5f, y0), ImVec2(strip.min.x + c.x1 - 0.5f, y1), kCanvasColor);
    const std::string& name = plan.params[c.param].name;
    const ImVec2 size = ImGui::CalcTextSize(name.c_str());
    if (c.x1 - c.x0 >= size.x + 6.0f)
      d->AddText(ImVec2(strip.min.x + c.x0 + 3, y0 + (strip.height - size.y) * 0.5f), rgb(16, 16, 16), name.c_str());
  }
  // Each bucket's name and size under it, where it fits.
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    float x0 = 1e30f, x1 = -1e30f;
    for (const StripCell& c : strip.cells)
      if (c.bucket == static_cast<int>(b)) {
        x0 = std::min(x0, c.x0);
        x1 = std::max(x1, c.x1);
      }
    char text[48];
    std::snprintf(text, sizeof text, "b%zu %.3g MiB", b, static_cast<double>(plan.buckets[b].bytes) / ddp::kMiB);
    if (x1 - x0 >= ImGui::CalcTextSize(text).x + 2.0f) d->AddText(ImVec2(strip.min.x + x0, y1 + 1), kDimTextColor, text);
  }
  return strip;
}

void DdpPanel::draw_steps(ImVec2 size) {
  ImGui::Text("one step: first plan %s (overlap %s), rebuilt plan %s (overlap %s of the all-reduce time hidden behind backward)",
              format_duration(first_step_.step_s).c_str(), percent(first_step_.overlap.fraction()).c_str(),
              format_duration(rebuilt_step_.step_s).c_str(), percent(rebuilt_step_.overlap.fraction()).c_str());
  // Rows grow into the room there is, up to twice their height.
  const float room = (size.y - ImGui::GetTextLineHeightWithSpacing() - 22.0f * scale_ - 4.0f) / 4.0f;
  const float row_height = std::clamp(room, kDdpRowHeight * scale_, 2.0f * kDdpRowHeight * scale_);
  ComputeRow first_compute(first_step_, before_, "first: compute", row_height);
  AllReduceRow first_comm(first_step_, "first: all-reduce", row_height);
  ComputeRow rebuilt_compute(rebuilt_step_, after_, "rebuilt: compute", row_height);
  AllReduceRow rebuilt_comm(rebuilt_step_, "rebuilt: all-reduce", row_height);
  const std::vector<const TimelineRow*> rows{&first_compute, &first_comm, &rebuilt_compute, &rebuilt_comm};
  TimelineStyle style;
  style.label_width = 136.0f * scale_;
  style.axis_height *= scale_;
  const float height = std::min(size.y - ImGui::GetTextLineHeightWithSpacing(), style.axis_height + row_height * 4 + 4.0f);
  const TimelineContext ctx = begin_timeline("ddp step", view_, rows, ImVec2(size.x, height), style);
  end_timeline(ctx);
  layout_.axis = ctx.axis;
  layout_.row_tops = ctx.row_tops;
  layout_.row_height = row_height;
}

void DdpPanel::draw_measured(ImVec2 size) {
  if (measured_->instances > 1) {
    // Lesson 08 builds a DDP per bucket size: one at a time.
    int shown = measured_->instance + 1;
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    if (ImGui::SliderInt("DDP of the trace", &shown, 1, measured_->instances)) show_instance(shown - 1);
    ImGui::SameLine(0, 16);
  }
  const MeasuredDdp& m = *measured_;
  ImGui::Text("measured: rank %d, step %lld: %zu buckets, all-reduce %s, %s hidden (ddp::overlap_of_step), %s exposed",
              m.rank, static_cast<long long>(m.step), m.measured.all_reduces.size(),
              format_duration(m.overlap.all_reduce_us * 1e-6).c_str(), percent(m.overlap.fraction()).c_str(),
              format_duration(m.overlap.exposed_us * 1e-6).c_str());
  const float row_height = kDdpRowHeight * scale_;
  const ddp::BucketPlan& plan = m.after ? *m.after : m.before;
  ComputeRow compute(m.measured, plan, "measured: grads", row_height);
  AllReduceRow comm(m.measured, "measured: all-reduce", row_height);
  const std::vector<const TimelineRow*> rows{&compute, &comm};
  TimelineStyle style;
  style.label_width = 136.0f * scale_;
  style.axis_height *= scale_;
  const TimelineContext ctx = begin_timeline("ddp measured", measured_view_, rows,
                                             ImVec2(size.x, std::max(60.0f, size.y - ImGui::GetTextLineHeightWithSpacing())), style);
  end_timeline(ctx);
  layout_.measured_drawn = true;
  layout_.measured_axis = ctx.axis;
  layout_.measured_row_tops = ctx.row_tops;
}

void DdpPanel::draw_summary() {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("ddp summary", 6, flags)) return;
  for (const char* h : {"step", "buckets", "step time", "all-reduce time", "hidden behind backward", "exposed"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  auto row = [](const char* name, size_t buckets, double step_s, const ddp::OverlapStats& o) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name);
    ImGui::TableNextColumn();
    ImGui::Text("%zu", buckets);
    ImGui::TableNextColumn();
    if (step_s > 0.0)
      ImGui::TextUnformatted(format_duration(step_s).c_str());
    else
      ImGui::TextDisabled("-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(o.all_reduce_us * 1e-6).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(percent(o.fraction()).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_duration(o.exposed_us * 1e-6).c_str());
  };
  row("model: first plan", before_.buckets.size(), first_step_.step_s, first_step_.overlap);
  row("model: rebuilt plan", after_.buckets.size(), rebuilt_step_.step_s, rebuilt_step_.overlap);
  if (measured_) row("measured", measured_->measured.all_reduces.size(), 0.0, measured_->overlap);
  ImGui::EndTable();
}

}  // namespace distlab::viz
