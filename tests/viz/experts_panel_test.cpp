// The Experts panel: the model sums each step's samples over the ranks in
// the order each rank recorded them, ignores other counters, and the
// render draws each expert's kept and dropped assignments to one scale
// (bar heights measured in pixels against the counts).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "app.hpp"
#include "experts_panel.hpp"
#include "render_helpers.hpp"
#include "trace/event.hpp"

namespace distlab::viz {
namespace {

using testing_util::render_in_window;

// Rank r's sample of step s for `label`: expert e kept 10 (e + 1) + r + s,
// dropped s e.
trace::Event sample(int rank, int step, const std::string& label, int experts = 4) {
  trace::CounterValues values;
  for (int e = 0; e < experts; ++e) values.emplace_back("kept " + std::to_string(e), 10 * (e + 1) + rank + step);
  for (int e = 0; e < experts; ++e) values.emplace_back("dropped " + std::to_string(e), step * e);
  values.emplace_back("capacity", 50);
  return trace::counter_event(rank, "experts " + label, values, 1000 * step + rank);
}

// Two ranks, three steps of "layer 0" and two of "layer 1", interleaved
// as ranks record them (rank 1's steps arrive late), and a memory counter.
std::vector<trace::Event> run() {
  std::vector<trace::Event> events;
  for (int s = 0; s < 3; ++s) events.push_back(sample(0, s, "layer 0"));
  events.push_back(trace::counter_event(0, "memory DDP", {{"parameters", 5}}, 10));
  for (int s = 0; s < 2; ++s) events.push_back(sample(0, s, "layer 1"));
  for (int s = 0; s < 3; ++s) events.push_back(sample(1, s, "layer 0"));
  for (int s = 0; s < 2; ++s) events.push_back(sample(1, s, "layer 1"));
  return events;
}

TEST(ExpertsModel, EachStepSumsTheRanksSamplesInTheirOrder) {
  ExpertsModel model;
  for (const trace::Event& e : run()) model.add(e);
  EXPECT_EQ(model.labels(), (std::vector<std::string>{"layer 0", "layer 1"}));
  const std::vector<ExpertStep>& steps = model.steps("layer 0");
  ASSERT_EQ(steps.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    const ExpertStep& step = steps[size_t(s)];
    EXPECT_EQ(step.ranks, 2);
    EXPECT_EQ(step.capacity, 50);
    ASSERT_EQ(step.kept.size(), 4u);
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(step.kept[size_t(e)], 2 * (10 * (e + 1) + s) + 1) << "step " << s << " expert " << e;
      EXPECT_EQ(step.dropped[size_t(e)], 2 * s * e);
    }
  }
  EXPECT_EQ(model.steps("layer 1").size(), 2u);
  EXPECT_TRUE(model.steps("memory DDP").empty());
  // The largest bar: step 2, expert 3: kept 2 (40 + 2) + 1, dropped 12.
  EXPECT_EQ(model.largest("layer 0"), 85 + 12);
}

TEST(ExpertsModel, OnlyExpertsCountersCount) {
  EXPECT_FALSE(expert_sample_of(trace::counter_event(0, "experts", {{"kept 0", 1}}, 0)));
  EXPECT_FALSE(expert_sample_of(trace::counter_event(0, "memory ZeRO-1", {{"kept 0", 1}}, 0)));
  const auto s = expert_sample_of(trace::counter_event(0, "experts run", {{"kept 2", 7}, {"kept x", 9}}, 0));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kept, (std::vector<int64_t>{0, 0, 7}));
  EXPECT_EQ(s->dropped, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(s->capacity, -1);
}

class ExpertsRender : public ::testing::Test {
 protected:
  ExpertsRender() : renderer_(1000, 600) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

// Step 3 of layer 0: each bar's kept part is blue and its dropped part red,
// their heights in pixels those of the counts on the label's one scale;
// expert 0 dropped nothing, so above its blue is the canvas.
TEST_F(ExpertsRender, KeptAndDroppedStackedToOneScale) {
  ExpertsPanel panel{Options{}};
  ASSERT_TRUE(panel.set_trace(run()));
  panel.select("layer 0", 2);
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const ExpertsFrameLayout& layout = panel.last_layout();
  ASSERT_TRUE(layout.drawn);
  EXPECT_EQ(layout.label, "layer 0");
  EXPECT_EQ(layout.step, 2);
  ASSERT_EQ(layout.bars.size(), 4u);
  EXPECT_EQ(layout.full, 97);
  const float per_token = (layout.chart_bottom - layout.chart_top) / 97.0f;
  for (const ExpertBar& bar : layout.bars) {
    const int e = bar.expert;
    EXPECT_EQ(bar.kept, 2 * (10 * (e + 1) + 2) + 1);
    EXPECT_EQ(bar.dropped, 4 * e);
    EXPECT_NEAR(layout.chart_bottom - bar.kept_top, per_token * float(bar.kept), 0.5f);
    EXPECT_NEAR(bar.kept_top - bar.dropped_top, per_token * float(bar.dropped), 0.5f);
    const float x = (bar.x0 + bar.x1) * 0.5f;
    EXPECT_TRUE(COLOR_AT(image, x, (bar.kept_top + layout.chart_bottom) * 0.5f, kExpertKeptColor, 2, 1)) << e;
    if (bar.dropped > 0)
      EXPECT_TRUE(COLOR_AT(image, x, (bar.kept_top + bar.dropped_top) * 0.5f, kExpertDroppedColor, 2, 1)) << e;
    else
      EXPECT_TRUE(COLOR_AT(image, x, bar.kept_top - 4, kCanvasColor, 2, 1)) << e;
  }
}

}  // namespace
}  // namespace distlab::viz
