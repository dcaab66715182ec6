// The Pipeline panel: schedules rendered headless with every box, gap and
// memory bar where hand-worked timings put it (GPipe and 1F1B with F = 1 s,
// B = 2 s, free messages), and the measured view of a real traced run
// (pipeline::PipelineExecutor on thread ranks) against its simulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "app.hpp"
#include "pipeline_panel.hpp"
#include "render_helpers.hpp"
#include "trace_loader.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using pipeline::ActionType;
using testing_util::render_in_window;

Options two_schedules() {
  Options o;
  o.schedule = "gpipe,1f1b";
  o.pipeline_stages = 4;
  o.microbatches = 8;
  o.cost_forward = 1.0;
  o.cost_backward = 2.0;
  o.cost_send = 0.0;
  return o;
}

// What `distlab-viz --panel pipeline --trace path` is given.
Options opening(const std::string& path) {
  Options o = two_schedules();
  o.panel = "pipeline";
  o.trace_files = {path};
  return o;
}

const ActionBox* find_box(const PipelineRun& run, int rank, ActionType type, int microbatch) {
  for (const ActionBox& b : run.boxes[rank])
    if (b.type == type && b.microbatch == microbatch) return &b;
  return nullptr;
}

TEST(PipelineScene, GPipeAndOneFOneBTimesAsWorkedByHand) {
  PipelinePanel panel(two_schedules());
  ASSERT_EQ(panel.runs().size(), 2u);
  const PipelineRun& gpipe = panel.runs()[0];
  const PipelineRun& ofob = panel.runs()[1];
  const int p = 4, m = 8;
  for (int r = 0; r < p; ++r)
    for (int k = 0; k < m; ++k) {
      // GPipe: F of microbatch k on rank r runs in [r + k, r + k + 1]; the
      // last forward ends at p - 1 + m, then the backwards, 2 s each, go
      // up the pipe: rank r's B of k starts at p - 1 + m + 2 (p - 1 - r) + 2k.
      const ActionBox* f = find_box(gpipe, r, ActionType::kForward, k);
      ASSERT_NE(f, nullptr);
      EXPECT_DOUBLE_EQ(f->begin_s, r + k);
      const ActionBox* b = find_box(gpipe, r, ActionType::kBackward, k);
      ASSERT_NE(b, nullptr);
      EXPECT_DOUBLE_EQ(b->begin_s, p - 1 + m + 2 * (p - 1 - r) + 2 * k);
    }
  // Both take (m + p - 1)(F + B) and idle (p - 1)/(m + p - 1) of it.
  EXPECT_DOUBLE_EQ(gpipe.makespan_s, (m + p - 1) * 3.0);
  EXPECT_DOUBLE_EQ(ofob.makespan_s, (m + p - 1) * 3.0);
  EXPECT_NEAR(gpipe.bubble, 3.0 / 11.0, 1e-12);
  EXPECT_NEAR(ofob.bubble, 3.0 / 11.0, 1e-12);
  // 1F1B: rank 0 runs F0..F3 in [0, 4], then waits for B0, which comes back
  // down the pipe: F0 reaches rank 3 at [3, 4], B0 runs there [4, 6], on
  // rank 2 [6, 8], rank 1 [8, 10], rank 0 [10, 12].
  EXPECT_DOUBLE_EQ(find_box(ofob, 0, ActionType::kBackward, 0)->begin_s, 10.0);
  // Memory: GPipe's stages each hold all m microbatches at once; 1F1B's
  // stage s at most p - s.
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(gpipe.peak_activations[s], m);
    EXPECT_EQ(ofob.peak_activations[s], p - s);
  }
}

TEST(PipelineScene, CostsAreOneRanksShareSplitOverItsStages) {
  const pipeline::ActionCosts c = action_costs({1.0, 2.0, 0.5, 0.1}, 2);
  EXPECT_DOUBLE_EQ(c.uniform.forward, 0.5);
  EXPECT_DOUBLE_EQ(c.uniform.backward, 1.0);
  EXPECT_DOUBLE_EQ(c.uniform.backward_weight, 0.25);
  EXPECT_DOUBLE_EQ(c.uniform.backward_input, 0.75);
  EXPECT_DOUBLE_EQ(c.message_s, 0.1);
  EXPECT_EQ(stages_per_rank(pipeline::ScheduleKind::kGPipe, 3), 1);
  EXPECT_EQ(stages_per_rank(pipeline::ScheduleKind::kInterleaved1F1B, 3), 3);
}

TEST(PipelineScene, RefusesWhatCannotBeShown) {
  Options o = two_schedules();
  o.schedule = "gpipe,1f1b,interleaved,looped_bfs,zb_h1";
  EXPECT_THROW(PipelinePanel{o}, std::invalid_argument);
  o.schedule = "bogus";
  EXPECT_THROW(PipelinePanel{o}, std::invalid_argument);
  EXPECT_FALSE(PipelinePanel(two_schedules()).set_trace({}));
}

// distlab-viz --help names, for --schedule, exactly the schedules the
// library builds (pipeline::all_kinds()), and the panel takes each of them.
TEST(PipelineScene, HelpNamesEveryScheduleThePanelTakes) {
  std::string help;
  ASSERT_EQ(testing_util::run({VIZ_BINARY, "--help"}, {}, &help), 0) << help;
  const size_t option = help.find("--schedule");
  ASSERT_NE(option, std::string::npos) << help;
  const size_t from = help.find(" of ", option), to = help.find(" (comma-separated)", option);
  ASSERT_NE(from, std::string::npos) << help;
  ASSERT_NE(to, std::string::npos) << help;
  std::vector<std::string> named;
  std::stringstream list(help.substr(from + 4, to - from - 4));
  for (std::string name; std::getline(list, name, ',');) named.push_back(name.substr(name.find_first_not_of(' ')));
  std::vector<std::string> built;
  for (pipeline::ScheduleKind kind : pipeline::all_kinds()) {
    built.push_back(pipeline::kind_name(kind));
    Options o = two_schedules();
    o.schedule = built.back();
    o.chunks = 2;
    EXPECT_NO_THROW(PipelinePanel{o}) << built.back();
  }
  EXPECT_EQ(named, built) << help;
}

// The measured view: simulated ranks on top, measured ranks under them, on
// one time axis. Each box wide enough to probe shows its action's colour
// where its times put it. Returns how many measured boxes were probed.
int probe_measured_view(const Image& image, const PipelineFrameLayout& layout, const MeasuredPipeline& mp) {
  EXPECT_TRUE(layout.measured_view);
  EXPECT_EQ(layout.columns.size(), 1u);
  if (layout.columns.empty()) return 0;
  const auto& c = layout.columns[0];
  const int ranks = mp.trace_run.schedule.ranks;
  EXPECT_EQ(c.row_tops.size(), static_cast<size_t>(2 * ranks));
  if (c.row_tops.size() != static_cast<size_t>(2 * ranks)) return 0;
  int probed = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    for (const ActionBox& b : mp.trace_run.boxes[rank]) {
      const float x0 = c.axis.x_of(b.begin_s), x1 = c.axis.x_of(b.end_s);
      if (x1 - x0 < 6) continue;  // too thin to probe inside its separating pixels
      ++probed;
      EXPECT_TRUE(COLOR_AT(image, x1 - 2.5f, c.row_tops[ranks + rank] + 4.0f,
                           action_color(b.type, b.microbatch), 2, 0))
          << "measured rank " << rank << " " << pipeline::type_name(b.type) << b.microbatch;
    }
    for (const ActionBox& b : mp.simulated.boxes[rank]) {
      const float x0 = c.axis.x_of(b.begin_s), x1 = c.axis.x_of(b.end_s);
      if (x1 - x0 < 6) continue;
      EXPECT_TRUE(COLOR_AT(image, x1 - 2.5f, c.row_tops[rank] + 4.0f, action_color(b.type, b.microbatch),
                           2, 0))
          << "simulated rank " << rank << " " << pipeline::type_name(b.type) << b.microbatch;
    }
  }
  return probed;
}

class PipelineRender : public ::testing::Test {
 protected:
  PipelineRender() : renderer_(1500, 860) { setup_imgui(1.0f); }
  HeadlessRenderer renderer_;
};

TEST_F(PipelineRender, BoxesGapsAndMemoryWhereTheScheduleSays) {
  PipelinePanel panel(two_schedules());
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const PipelineFrameLayout& layout = panel.last_layout();
  ASSERT_EQ(layout.columns.size(), 2u);
  const auto& gp = layout.columns[0];
  const auto& fb = layout.columns[1];
  // 4 px into the row: inside the box (2 px in), above any centred label.
  auto row_mid = [](const PipelineFrameLayout::Column& c, int rank) { return c.row_tops[rank] + 4.0f; };

  // GPipe, rank 2, F3 in [5, 6]: its microbatch's colour, inside the box's
  // right end (a centred label may cover the middle).
  EXPECT_TRUE(COLOR_AT(image, gp.axis.x_of(6.0) - 3, row_mid(gp, 2), action_color(ActionType::kForward, 3), 2, 0));
  // GPipe, rank 3, B5 in [21, 23].
  EXPECT_TRUE(COLOR_AT(image, gp.axis.x_of(23.0) - 3, row_mid(gp, 3), action_color(ActionType::kBackward, 5), 2, 0));
  // The bubble: rank 3 has nothing before t = 3, rank 0 nothing in (8, 17).
  EXPECT_TRUE(COLOR_AT(image, gp.axis.x_of(1.5), row_mid(gp, 3), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, gp.axis.x_of(12.5), row_mid(gp, 0), kCanvasColor, 2, 0));
  // 1F1B, rank 0: waits in (4, 10), then B0 in [10, 12].
  EXPECT_TRUE(COLOR_AT(image, fb.axis.x_of(7.0), row_mid(fb, 0), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, fb.axis.x_of(12.0) - 3, row_mid(fb, 0), action_color(ActionType::kBackward, 0), 2, 0));
  // One time axis: the same time is the same distance into both columns.
  EXPECT_NEAR(gp.axis.x_of(20.0) - gp.axis.x0, fb.axis.x_of(20.0) - fb.axis.x0, 0.5);

  // Memory: 1F1B's stage 0 holds 4 microbatches in (4, 10), of a full row of 8
  // (GPipe's peak): a bar half the row high; above it, nothing.
  ASSERT_EQ(fb.memory_scale, 8);
  const float bottom = fb.memory_row_tops[0] + fb.memory_row_height - 2.0f;
  const float bar = (fb.memory_row_height - 4.0f) * 4.0f / 8.0f;
  const float x = fb.memory_axis.x_of(7.0);
  EXPECT_TRUE(COLOR_AT(image, x, bottom - 2, kMemoryColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x, bottom - bar + 2, kMemoryColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x, bottom - bar - 3, kCanvasColor, 2, 0));
  // GPipe's stage 0 holds all 8 at t = 8.5: a full bar.
  const float gp_bottom = gp.memory_row_tops[0] + gp.memory_row_height - 2.0f;
  EXPECT_TRUE(COLOR_AT(image, gp.memory_axis.x_of(8.5), gp_bottom - (gp.memory_row_height - 4.0f) + 2, kMemoryColor, 2, 0));
}

// A real run: the executor on 2 thread ranks, traced to a file by the
// library's sink, opened as `distlab-viz --panel pipeline --trace` opens it.
TEST_F(PipelineRender, MeasuredRunUnderItsSimulation) {
  const std::string path = testing_util::temp_path("pipeline_run.json");
  std::string output;
  ASSERT_EQ(testing_util::run({VIZ_PIPELINE_EMITTER, "--out", path, "--schedule", "1f1b", "--ranks", "2",
                               "--microbatches", "4", "--steps", "2"},
                              {}, &output),
            0)
      << output;
  const LoadedTrace loaded = load_trace_file(path);
  App app(opening(path));
  PipelinePanel& panel = app.pipeline_panel();
  ASSERT_TRUE(panel.measured().has_value());
  const MeasuredPipeline& mp = *panel.measured();
  EXPECT_EQ(mp.trace_run.schedule.kind, pipeline::ScheduleKind::k1F1B);
  EXPECT_EQ(mp.trace_run.schedule.ranks, 2);
  EXPECT_EQ(mp.trace_run.schedule.microbatches, 4);
  EXPECT_EQ(mp.step, 1);  // the last of the two steps

  // The measured boxes are the trace's step-1 compute events, every one.
  std::map<int, std::vector<const trace::Event*>> by_rank;
  for (const trace::Event& e : loaded.events)
    if (e.lane.rfind("stage ", 0) == 0 && e.arg("step") == "1" && (e.category == "fwd" || e.category == "bwd"))
      by_rank[e.rank].push_back(&e);
  ASSERT_EQ(by_rank.size(), 2u);
  for (auto& [rank, events] : by_rank) {
    ASSERT_EQ(events.size(), 8u) << "rank " << rank;  // F and B of 4 microbatches
    ASSERT_EQ(mp.trace_run.boxes[rank].size(), 8u);
  }
  // The simulation ran on the measured costs: its F on stage 0 lasts the
  // mean of the recorded F durations there.
  double sum = 0.0;
  int count = 0;
  for (const trace::Event* e : by_rank[0])
    if (e->category == "fwd") sum += e->duration_us() * 1e-6, ++count;
  const ActionBox* sim_f = find_box(mp.simulated, 0, ActionType::kForward, 2);
  ASSERT_NE(sim_f, nullptr);
  ASSERT_EQ(count, 4);
  EXPECT_NEAR(mp.measured.costs.per_stage[0].forward, sum / count, 1e-12);
  // The simulator's events are in whole microseconds: each end rounds by up
  // to 0.5 us, so the duration by up to 1 us (and the seconds' last bits).
  EXPECT_NEAR(sim_f->end_s - sim_f->begin_s, sum / count, 1.0e-6 + 1e-12);

  // Rendered: the simulated ranks above, the measured ranks below, on one axis.
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  const PipelineFrameLayout& layout = panel.last_layout();
  EXPECT_GT(probe_measured_view(image, layout, mp), 8);
}

// Lesson 10's own traces, one file per schedule, opened as `distlab-viz
// --panel pipeline --trace /tmp/pp.1f1b.json` opens them: the panel
// rebuilds the schedule from the events, draws every action the schedule
// gives each rank in the schedule's order, and finds from the file the
// bubbles and activation peaks the lesson printed from its memory.
TEST_F(PipelineRender, LessonTenTracesOpenUnderTheirSimulation) {
  const std::string base = testing_util::temp_path("lesson10.json");
  std::string output;
  ASSERT_EQ(testing_util::run({VIZ_LESSON_10, "--steps", "2", "--trace", base}, {}, &output, 120000), 0) << output;
  // The lesson's table: "   1f1b  1  178.28 ms  0.195  0.243  0.200   2 1 (2 1)".
  const std::regex row(R"(^\s+(gpipe|1f1b|interleaved|looped_bfs|zb_h1)\s+(\d)\s+[\d.]+ m?s\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+([\d ]+)\()");
  std::map<std::string, std::vector<std::string>> printed;  // schedule -> the row's captures
  std::istringstream text(output);
  for (std::string line; std::getline(text, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) printed[m[1]] = {m[0], m[1], m[2], m[3], m[4], m[5]};
  }
  ASSERT_EQ(printed.size(), 5u) << output;
  for (const auto& [name, m] : printed) {
    const std::string path = base.substr(0, base.size() - 5) + "." + name + ".json";
    App app(opening(path));
    PipelinePanel& panel = app.pipeline_panel();
    ASSERT_TRUE(panel.measured().has_value()) << path;
    const MeasuredPipeline& mp = *panel.measured();
    const pipeline::Schedule& schedule = mp.trace_run.schedule;
    EXPECT_EQ(pipeline::kind_name(schedule.kind), name);
    EXPECT_EQ(schedule.ranks, 2);
    EXPECT_EQ(schedule.microbatches, 4);
    EXPECT_EQ(schedule.stages_per_rank, std::stoi(m[2]));
    EXPECT_EQ(mp.step, 2);  // the last timed step
    // Every rank's boxes: the schedule's compute actions, in its order.
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> want, got;
      for (const pipeline::Action& a : schedule.programs[rank])
        if (pipeline::is_compute(a.type)) want.push_back(pipeline::to_string(a));
      for (const ActionBox& b : mp.trace_run.boxes[rank])
        got.push_back(pipeline::to_string(pipeline::Action{b.type, b.stage, b.microbatch}));
      EXPECT_EQ(got, want) << name << " rank " << rank;
    }
    // The file gives what the lesson measured in memory (printed to 3 decimals).
    EXPECT_NEAR(mp.measured.bubble, std::stod(m[3]), 0.0005 + 1e-9) << name;
    EXPECT_NEAR(mp.simulated.bubble, std::stod(m[4]), 0.0005 + 1e-9) << name;
    std::string peaks;
    for (int peak : mp.measured.peak_activations) peaks += std::to_string(peak) + " ";
    EXPECT_EQ(peaks, m[5]) << name;

    const Image image = render_in_window(renderer_, [&] { panel.draw(); });
    EXPECT_GT(probe_measured_view(image, panel.last_layout(), mp), 4) << name;
  }
}

// The capstone's trace (2 stages x 2 replicas: pipelines {0, 1} and {2, 3})
// holds two pipelines; the panel shows the one with world rank 0, its
// ranks numbered within the group as the schedule counts them. In three
// dimensions (--tensor 2: 2 x 2 x 2 on 8 ranks) there are four pipelines,
// one per replica and tensor rank; world rank 0's is {0, 2}, and the trace
// also holds the tensor groups' all-reduces inside the layers.
class CapstoneTrace : public PipelineRender, public ::testing::WithParamInterface<int> {};

TEST_P(CapstoneTrace, ShowsItsFirstPipeline) {
  const int tensor = GetParam();
  const std::string path = testing_util::temp_path("capstone_pipeline_t" + std::to_string(tensor) + ".json");
  std::string output;
  ASSERT_EQ(testing_util::run({VIZ_LESSON_11, "--backend", "threads", "--preset", "tiny", "--epochs", "1",
                               "--batches-per-epoch", "2", "--eval-batches", "1", "--tensor", std::to_string(tensor),
                               "--trace", path},
                              {}, &output, 120000),
            0)
      << output;
  App app(opening(path));
  PipelinePanel& panel = app.pipeline_panel();
  ASSERT_TRUE(panel.measured().has_value());
  const MeasuredPipeline& mp = *panel.measured();
  EXPECT_EQ(mp.group, tensor == 1 ? "pipeline0" : "pipeline0-tensor0");
  const std::vector<int> world_ranks = {0, tensor};  // stage s of replica 0, tensor rank 0: world rank s * T
  EXPECT_EQ(mp.world_ranks, world_ranks);
  const pipeline::Schedule& schedule = mp.trace_run.schedule;
  EXPECT_EQ(schedule.kind, pipeline::ScheduleKind::k1F1B);
  EXPECT_EQ(schedule.ranks, 2);
  EXPECT_EQ(mp.step, 1);  // the second of the two batches
  // Rank r's boxes are its world rank's compute events of that step, in the schedule's order.
  const LoadedTrace loaded = load_trace_file(path);
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> events, boxes, want;
    for (const trace::Event& e : loaded.events)
      if (e.rank == world_ranks[rank] && e.lane.rfind("stage ", 0) == 0 && e.arg("step") == "1" &&
          (e.category == "fwd" || e.category == "bwd"))
        events.push_back(e.name);
    for (const ActionBox& b : mp.trace_run.boxes[rank])
      boxes.push_back(pipeline::to_string(pipeline::Action{b.type, b.stage, b.microbatch}));
    for (const pipeline::Action& a : schedule.programs[rank])
      if (pipeline::is_compute(a.type)) want.push_back(pipeline::to_string(a));
    EXPECT_EQ(boxes, want) << "rank " << rank;
    std::sort(events.begin(), events.end());
    std::sort(boxes.begin(), boxes.end());
    EXPECT_EQ(boxes, events) << "rank " << rank;
  }
  if (tensor > 1) {  // the layers' all-reduces, named by their tensor group, on world rank 0
    int tensor_collectives = 0;
    for (const trace::Event& e : loaded.events)
      if (e.rank == 0 && e.name.find("[tensor-r0s0]") != std::string::npos) ++tensor_collectives;
    EXPECT_GT(tensor_collectives, 0) << "no collective of the tensor group tensor-r0s0 on rank 0";
  }
  const Image image = render_in_window(renderer_, [&] { panel.draw(); });
  EXPECT_GT(probe_measured_view(image, panel.last_layout(), mp), 4);
}

INSTANTIATE_TEST_SUITE_P(Capstone, CapstoneTrace, ::testing::Values(1, 2),
                         [](const auto& info) { return "tensor" + std::to_string(info.param); });

}  // namespace
}  // namespace distlab::viz
