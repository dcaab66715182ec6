// A pipeline schedule on paper, for the Pipeline panel: the library's
// schedule (pipeline::make_schedule) timed by its simulator
// (pipeline::simulate), or read back from a trace of a real run
// (pipeline::measure), as boxes per rank ready to draw. No ImGui here: the
// tests compute where every box must be from these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colors.hpp"
#include "pipeline/measure.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/simulator.hpp"
#include "trace/event.hpp"

namespace distlab::viz {

// Seconds of one rank's whole share of the model for one microbatch. A rank
// holding v stages (Interleaved 1F1B, LoopedBFS) runs each of them in 1/v of
// that, so schedules of the same model compare on one time axis.
struct PipelineCosts {
  double forward = 1.0;
  double backward = 2.0;  // full backward B = I + W
  double weight = 1.0;    // W of a split backward (zero-bubble); I = backward - weight
  double send = 0.0;      // latency of each message between ranks
};

struct PipelineSetup {
  pipeline::ScheduleKind kind = pipeline::ScheduleKind::k1F1B;
  int ranks = 4;         // p
  int microbatches = 8;  // m
  int chunks = 2;        // v, used by the schedules that hold several stages per rank
  PipelineCosts costs;
};

// v for this kind: `chunks` for Interleaved 1F1B and LoopedBFS, 1 for the others.
int stages_per_rank(pipeline::ScheduleKind kind, int chunks);
// The simulator's per-stage costs for `costs` on v stages per rank.
pipeline::ActionCosts action_costs(const PipelineCosts& costs, int stages_per_rank);

// One compute action on the timeline.
struct ActionBox {
  pipeline::ActionType type = pipeline::ActionType::kForward;
  int stage = 0;
  int microbatch = 0;
  double begin_s = 0.0;
  double end_s = 0.0;
};

// A timed schedule: what one column (or the measured row set) draws.
struct PipelineRun {
  std::string title;  // "1F1B p=4 m=8 v=1"
  pipeline::Schedule schedule;
  std::vector<std::vector<ActionBox>> boxes;  // per rank, in time order
  double makespan_s = 0.0;
  double bubble = 0.0;  // mean idle fraction of the ranks
  // Per stage: (time, microbatches held from then on), and the peak.
  std::vector<std::vector<std::pair<double, int>>> activations;
  std::vector<int> peak_activations;
  int peak() const;  // the largest peak of any stage
};

// Builds and simulates the setup. Throws pipeline::ScheduleError (an
// invalid p, m, v) with the library's message.
PipelineRun simulate_run(const PipelineSetup& setup);
// Any schedule under any costs (the measured costs of a trace, per stage).
PipelineRun simulate_run(const pipeline::Schedule& schedule, const pipeline::ActionCosts& costs);

// A pipeline run read from a trace, and the simulation of the same schedule
// with the costs measured in it.
struct MeasuredPipeline {
  int64_t step = 0;
  std::string group;            // the pipeline group shown, when the job had several ("pipeline0")
  std::vector<int> world_ranks;  // its ranks' world ranks, by rank in the group
  pipeline::Measured measured;
  PipelineRun trace_run;  // the recorded actions of that step, times from its first action
  PipelineRun simulated;  // simulate(schedule, measured.costs)
};

// Finds the executor's events (lanes "stage s" with args schedule,
// microbatch, stage, step), rebuilds the schedule they ran (kind from
// "schedule", p from the ranks, v from the stages, m from the
// microbatches) and measures step `step` (-1: the last one). Of a job with
// several pipelines (events labelled with their group, as the capstone's),
// the one with world rank 0. Nothing when
// the trace holds no pipeline run. Throws pipeline::ScheduleError when the
// events describe no schedule the library can build.
std::optional<MeasuredPipeline> measure_trace(const std::vector<trace::Event>& events, int64_t step = -1);

// ", pipeline0 (world ranks 0 1)": which pipeline of several is shown;
// empty when the job had one.
std::string group_label(const std::string& group, const std::vector<int>& world_ranks);

// F in the microbatch's colour, B darker, I and W lighter: the action's
// kind reads from the shade, its microbatch from the hue.
Color action_color(pipeline::ActionType type, int microbatch);
// "F3", "B3", "I3", "W3"; with v > 1 the chunk too: "F3.1" is chunk 1.
std::string action_label(const ActionBox& box, int ranks, int stages_per_rank);

}  // namespace distlab::viz
