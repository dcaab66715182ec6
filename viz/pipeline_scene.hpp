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
  std::string compound;  // a half of an OVERLAP_F_B: the whole action's name ("(0F3;3B1)OVERLAP_F_B"), else ""
};

// The papers' bubble of a schedule (pipeline/closed_form.hpp) as a fraction
// of the step, beside the simulated and measured ones.
struct ClosedFormBubble {
  double bubble = 0.0;
  std::string formula;  // "(p-1)(F+B)"
};
// Under `costs`, per-stage costs averaged first (the formulas assume equal
// stages); nullopt where the references give none (LoopedBFS).
std::optional<ClosedFormBubble> closed_form_of(const pipeline::Schedule& schedule, pipeline::ActionCosts costs);

// A timed schedule: what one column (or the measured row set) draws.
struct PipelineRun {
  std::string title;  // "1F1B p=4 m=8 v=1"
  pipeline::Schedule schedule;
  std::vector<std::vector<ActionBox>> boxes;  // per rank, in time order
  double makespan_s = 0.0;
  double bubble = 0.0;  // mean idle fraction of the ranks
  std::optional<ClosedFormBubble> closed;  // the same schedule's closed form, under the same costs
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

// The playground's laws: the setup re-simulated for every m in a range, one
// series per schedule, so a student sees how the bubble and the memory move
// with m. GPipe and 1F1B idle (p-1)/(m+p-1) of the step (with F = B up
// front): the pipe fills and drains once whatever m is, so more microbatches
// hide it. GPipe runs every forward before any backward, so each stage holds
// all m microbatches' activations; 1F1B starts backwards after p forwards,
// so rank 0 never holds more than min(m, p).
inline constexpr int kSweepFirstMicrobatches = 1;
inline constexpr int kSweepLastMicrobatches = 32;  // the panel's m slider ends here too

struct SweepPoint {
  int microbatches = 0;  // m
  double bubble = 0.0;   // the simulation's mean idle fraction
  // The busiest rank's peak of activations held, in microbatches of one
  // rank's share of the model: a rank holding v stages counts each stage's
  // microbatch as 1/v, so schedules of the same model compare (v = 1: the
  // largest stage peak).
  double rank_peak = 0.0;
  std::vector<int> peak_activations;  // per stage, in that stage's microbatches
};

struct SweepSeries {
  pipeline::ScheduleKind kind = pipeline::ScheduleKind::k1F1B;
  std::vector<SweepPoint> points;  // by m ascending; an m the schedule refuses is absent
  const SweepPoint* at(int microbatches) const;  // nullptr when absent
};

// For each kind, the setup (p, v, costs; its kind and m are ignored)
// simulated with m = first..last microbatches. An m that make_schedule or
// the simulator refuses (pipeline::ScheduleError) is left out of that
// series; other errors propagate.
std::vector<SweepSeries> sweep_microbatches(const PipelineSetup& setup, const std::vector<pipeline::ScheduleKind>& kinds,
                                            int first = kSweepFirstMicrobatches, int last = kSweepLastMicrobatches);

// The busiest rank's peak activations (see SweepPoint::rank_peak), from
// each stage's curve of activations held (stage s on the rank the
// schedule's placement gives it: s % p looped, r and 2p-1-r in a V).
double rank_peak(const std::vector<std::vector<std::pair<double, int>>>& activations, const pipeline::Schedule& schedule);
inline double rank_peak(const PipelineRun& run) { return rank_peak(run.activations, run.schedule); }

// The sweep of the last setup asked for: recomputed only when the kinds,
// p, v or costs change (moving m only moves the plots' marker), so the
// panel can ask for it every frame.
class SweepCache {
 public:
  const std::vector<SweepSeries>& get(const PipelineSetup& setup, const std::vector<pipeline::ScheduleKind>& kinds);
  int computed() const { return computed_; }  // how many sweeps were run

 private:
  bool valid_ = false;
  std::vector<pipeline::ScheduleKind> kinds_;
  std::vector<int> v_;  // stages per rank of each kind
  int ranks_ = 0;
  PipelineCosts costs_;
  std::vector<SweepSeries> series_;
  int computed_ = 0;
};

// One colour per schedule kind, for its line in the plots and its column's
// title: a palette indexed by the kind's place in pipeline::all_kinds(), so
// a kind added there gets the next colour.
Color schedule_color(pipeline::ScheduleKind kind);

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
