#include "pipeline_scene.hpp"

#include "pipeline/closed_form.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>

namespace distlab::viz {
namespace {

using pipeline::ActionType;
using pipeline::ScheduleKind;

ActionType type_of_category(const std::string& category, bool* ok) {
  *ok = true;
  if (category == "fwd") return ActionType::kForward;
  if (category == "bwd") return ActionType::kBackward;
  if (category == "bwd_input") return ActionType::kBackwardInput;
  if (category == "bwd_weight") return ActionType::kBackwardWeight;
  *ok = false;
  return ActionType::kForward;
}

int int_arg(const trace::Event& e, const char* key) {
  try {
    return std::stoi(e.arg(key, "-1"));
  } catch (const std::exception&) {
    return -1;
  }
}

// Boxes from events in the simulator's form (lane "stage s", args stage and
// microbatch), times relative to `origin_us`.
std::vector<std::vector<ActionBox>> boxes_of(const std::vector<const trace::Event*>& events, int ranks,
                                             int64_t origin_us) {
  std::vector<std::vector<ActionBox>> boxes(static_cast<size_t>(ranks));
  for (const trace::Event* e : events) {
    bool ok = false;
    const ActionType type = type_of_category(e->category, &ok);
    if (!ok || e->rank < 0 || e->rank >= ranks) continue;
    boxes[e->rank].push_back({type, int_arg(*e, "stage"), int_arg(*e, "microbatch"), (e->begin_us - origin_us) * 1e-6,
                              (e->end_us - origin_us) * 1e-6, e->arg("compound")});
  }
  for (auto& row : boxes)
    std::sort(row.begin(), row.end(), [](const ActionBox& a, const ActionBox& b) { return a.begin_s < b.begin_s; });
  return boxes;
}

// The simulator's rule on recorded boxes: a stage holds a microbatch's
// activations from the start of its F to the end of its B (or W).
void fill_activations(PipelineRun& run, int stages) {
  std::vector<std::vector<std::pair<double, int>>> changes(static_cast<size_t>(stages));
  for (const auto& row : run.boxes)
    for (const ActionBox& b : row) {
      if (b.stage < 0 || b.stage >= stages) continue;
      if (b.type == ActionType::kForward) changes[b.stage].push_back({b.begin_s, +1});
      if (b.type == ActionType::kBackward || b.type == ActionType::kBackwardWeight)
        changes[b.stage].push_back({b.end_s, -1});
    }
  run.activations.assign(static_cast<size_t>(stages), {});
  run.peak_activations.assign(static_cast<size_t>(stages), 0);
  for (int s = 0; s < stages; ++s) {
    std::sort(changes[s].begin(), changes[s].end());
    int held = 0;
    for (const auto& [time, delta] : changes[s]) {
      held += delta;
      run.peak_activations[s] = std::max(run.peak_activations[s], held);
      run.activations[s].push_back({time, held});
    }
  }
}

std::string title_of(const pipeline::Schedule& s) {
  return std::string(pipeline::kind_name(s.kind)) + " p=" + std::to_string(s.ranks) + " m=" +
         std::to_string(s.microbatches) + " v=" + std::to_string(s.stages_per_rank);
}

}  // namespace

int stages_per_rank(ScheduleKind kind, int chunks) { return pipeline::stages_per_rank_for(kind, chunks); }

pipeline::ActionCosts action_costs(const PipelineCosts& c, int v) {
  pipeline::ActionCosts out;
  const double share = 1.0 / std::max(1, v);
  const double weight = std::min(c.weight, c.backward);
  out.uniform = {c.forward * share, c.backward * share, (c.backward - weight) * share, weight * share};
  out.message_s = c.send;
  return out;
}

int PipelineRun::peak() const {
  int peak = 0;
  for (int p : peak_activations) peak = std::max(peak, p);
  return peak;
}

std::optional<ClosedFormBubble> closed_form_of(const pipeline::Schedule& schedule, pipeline::ActionCosts costs) {
  if (!costs.per_stage.empty()) {
    pipeline::StageCosts mean{0, 0, 0, 0};
    const double n = static_cast<double>(costs.per_stage.size());
    for (const pipeline::StageCosts& c : costs.per_stage) {
      mean.forward += c.forward / n;
      mean.backward += c.backward / n;
      mean.backward_input += c.backward_input / n;
      mean.backward_weight += c.backward_weight / n;
    }
    costs.uniform = mean;
    costs.per_stage.clear();
  }
  const auto form = pipeline::closed_form(schedule.kind, schedule.ranks, costs);
  const auto bubble = pipeline::closed_form_bubble(schedule, costs);
  if (!form || !bubble) return std::nullopt;
  return ClosedFormBubble{*bubble, form->formula};
}

PipelineRun simulate_run(const pipeline::Schedule& schedule, const pipeline::ActionCosts& costs) {
  const pipeline::Simulation sim = pipeline::simulate(schedule, costs);
  PipelineRun run;
  run.title = title_of(schedule);
  run.schedule = schedule;
  std::vector<const trace::Event*> compute;
  for (const trace::Event& e : sim.events)
    if (e.lane != trace::kLaneComm) compute.push_back(&e);
  run.boxes = boxes_of(compute, schedule.ranks, 0);
  run.makespan_s = sim.makespan;
  run.bubble = sim.bubble;
  run.closed = closed_form_of(schedule, costs);
  run.activations = sim.activations;
  run.peak_activations = sim.peak_activations;
  return run;
}

PipelineRun simulate_run(const PipelineSetup& setup) {
  const int v = stages_per_rank(setup.kind, setup.chunks);
  const pipeline::Schedule schedule = pipeline::make_schedule(setup.kind, setup.ranks, setup.microbatches, v);
  return simulate_run(schedule, action_costs(setup.costs, v));
}

const SweepPoint* SweepSeries::at(int microbatches) const {
  for (const SweepPoint& point : points)
    if (point.microbatches == microbatches) return &point;
  return nullptr;
}

double rank_peak(const std::vector<std::vector<std::pair<double, int>>>& activations, const pipeline::Schedule& schedule) {
  const int p = schedule.ranks, v = schedule.stages_per_rank;
  double peak = 0.0;
  for (int r = 0; r < p; ++r) {
    // The rank's stages (r, r + p, ... looped; r and 2p-1-r in a V): each
    // curve is (time, held from then on); the rank's total changes only
    // where one of them does.
    std::vector<int> stages;
    for (int s = 0; s < static_cast<int>(activations.size()); ++s)
      if (schedule.rank_of_stage(s) == r) stages.push_back(s);
    std::vector<size_t> next(stages.size(), 0);
    std::vector<int> held(stages.size(), 0);
    for (;;) {
      double t = std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < stages.size(); ++k)
        if (next[k] < activations[stages[k]].size()) t = std::min(t, activations[stages[k]][next[k]].first);
      if (t == std::numeric_limits<double>::infinity()) break;
      int total = 0;
      for (size_t k = 0; k < stages.size(); ++k) {
        const auto& curve = activations[stages[k]];
        while (next[k] < curve.size() && curve[next[k]].first == t) held[k] = curve[next[k]++].second;
        total += held[k];
      }
      peak = std::max(peak, static_cast<double>(total) / v);
    }
  }
  return peak;
}

std::vector<SweepSeries> sweep_microbatches(const PipelineSetup& setup, const std::vector<ScheduleKind>& kinds,
                                            int first, int last) {
  std::vector<SweepSeries> out;
  for (ScheduleKind kind : kinds) {
    SweepSeries series;
    series.kind = kind;
    for (int m = first; m <= last; ++m) {
      // The simulator alone, as simulate_run calls it: the boxes are not drawn.
      const int v = stages_per_rank(kind, setup.chunks);
      try {
        const pipeline::Schedule schedule = pipeline::make_schedule(kind, setup.ranks, m, v);
        const pipeline::Simulation sim = pipeline::simulate(schedule, action_costs(setup.costs, v));
        series.points.push_back({m, sim.bubble, rank_peak(sim.activations, schedule), sim.peak_activations});
      } catch (const pipeline::ScheduleError&) {
        // this schedule cannot take m microbatches: no point there
      }
    }
    out.push_back(std::move(series));
  }
  return out;
}

const std::vector<SweepSeries>& SweepCache::get(const PipelineSetup& setup, const std::vector<ScheduleKind>& kinds) {
  std::vector<int> v;
  for (ScheduleKind kind : kinds) v.push_back(stages_per_rank(kind, setup.chunks));
  const PipelineCosts& c = setup.costs;
  const bool same_costs = c.forward == costs_.forward && c.backward == costs_.backward && c.weight == costs_.weight &&
                          c.send == costs_.send;
  if (valid_ && kinds == kinds_ && v == v_ && setup.ranks == ranks_ && same_costs) return series_;
  series_ = sweep_microbatches(setup, kinds);
  valid_ = true;
  kinds_ = kinds;
  v_ = std::move(v);
  ranks_ = setup.ranks;
  costs_ = c;
  ++computed_;
  return series_;
}

Color schedule_color(ScheduleKind kind) {
  // Far from the memory bars' blue-grey and the cursor's yellow, and from
  // each other on the dark canvas.
  static constexpr Color kPalette[] = {rgb(239, 83, 80),  rgb(66, 165, 245), rgb(102, 187, 106), rgb(186, 104, 200),
                                       rgb(255, 152, 0),  rgb(38, 198, 218), rgb(240, 98, 146),  rgb(161, 136, 127)};
  const std::vector<ScheduleKind> kinds = pipeline::all_kinds();
  const size_t index = static_cast<size_t>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
  return kPalette[index % std::size(kPalette)];
}

namespace {

// The executor's events of one pipeline. A job of several pipelines (the
// capstone: R replicas of a P-stage pipeline) labels them with their
// pipeline group; the one holding the lowest world rank is taken, and its
// events renumbered by rank within the group, as the schedule counts them.
std::vector<trace::Event> one_pipeline(const std::vector<trace::Event>& events, std::string* group,
                                       std::vector<int>* world_ranks) {
  std::map<std::string, int> lowest;  // group -> its lowest world rank
  for (const trace::Event& e : events) {
    if (e.lane.rfind("stage ", 0) != 0 || e.arg("schedule").empty() || e.arg("group").empty()) continue;
    auto [it, fresh] = lowest.emplace(e.arg("group"), e.rank);
    if (!fresh) it->second = std::min(it->second, e.rank);
  }
  if (lowest.empty()) return events;
  *group = std::min_element(lowest.begin(), lowest.end(), [](const auto& a, const auto& b) {
             return a.second < b.second;
           })->first;
  std::vector<trace::Event> out;
  std::map<int, int> world_of;  // group rank -> world rank
  for (const trace::Event& e : events) {
    if (e.lane.rfind("stage ", 0) != 0 || e.arg("group") != *group) continue;
    out.push_back(e);
    out.back().rank = int_arg(e, "group_rank");
    world_of[out.back().rank] = e.rank;
  }
  for (const auto& [rank, world] : world_of) world_ranks->push_back(world);
  return out;
}

}  // namespace

std::string group_label(const std::string& group, const std::vector<int>& world_ranks) {
  if (group.empty()) return "";
  std::string label = ", " + group + " (world ranks";
  for (int r : world_ranks) label += " " + std::to_string(r);
  return label + ")";
}

std::optional<MeasuredPipeline> measure_trace(const std::vector<trace::Event>& all_events, int64_t step) {
  std::string group;
  std::vector<int> world_ranks;
  const std::vector<trace::Event> events = one_pipeline(all_events, &group, &world_ranks);
  // The schedule kind, its shape and the steps recorded.
  std::map<std::string, int> kinds;
  int ranks = 0, stages = 0, microbatches = 0;
  int64_t last_step = -1;
  for (const trace::Event& e : events) {
    if (e.lane.rfind("stage ", 0) != 0 || e.arg("schedule").empty()) continue;
    bool ok = false;
    type_of_category(e.category, &ok);
    if (!ok) continue;
    ++kinds[e.arg("schedule")];
    ranks = std::max(ranks, e.rank + 1);
    stages = std::max(stages, int_arg(e, "stage") + 1);
    microbatches = std::max(microbatches, int_arg(e, "microbatch") + 1);
    last_step = std::max<int64_t>(last_step, int_arg(e, "step"));
  }
  if (kinds.empty()) return std::nullopt;
  if (kinds.size() > 1)
    throw pipeline::ScheduleError("the trace holds runs of " + std::to_string(kinds.size()) +
                                  " schedules; open the trace of one run");
  const ScheduleKind kind = pipeline::parse_kind(kinds.begin()->first);
  if (ranks < 1 || stages % ranks != 0)
    throw pipeline::ScheduleError("the trace's pipeline events span " + std::to_string(stages) + " stages on " +
                                  std::to_string(ranks) + " ranks, not a whole number of stages per rank");
  MeasuredPipeline out;
  out.step = step >= 0 ? step : last_step;
  const pipeline::Schedule schedule = pipeline::make_schedule(kind, ranks, microbatches, stages / ranks);
  out.measured = pipeline::measure(events, schedule, out.step);

  std::vector<const trace::Event*> chosen;
  int64_t origin = std::numeric_limits<int64_t>::max();
  const std::string step_text = std::to_string(out.step);
  for (const trace::Event& e : events) {
    if (e.lane.rfind("stage ", 0) != 0 || e.arg("schedule") != kinds.begin()->first) continue;
    if (out.step >= 0 && e.arg("step") != step_text) continue;
    chosen.push_back(&e);
    // Time 0 is where pipeline::measure starts the step: its first action
    // that is not a receive (an early receive is the previous step's tail).
    if (e.category != "recv") origin = std::min(origin, e.begin_us);
  }
  out.group = group;
  out.world_ranks = world_ranks;
  out.trace_run.title =
      "measured: " + title_of(schedule) + ", step " + std::to_string(out.step) + group_label(group, world_ranks);
  out.trace_run.schedule = schedule;
  out.trace_run.boxes = boxes_of(chosen, ranks, origin);
  out.trace_run.makespan_s = out.measured.makespan_s;
  out.trace_run.bubble = out.measured.bubble;
  fill_activations(out.trace_run, schedule.num_stages());
  out.simulated = simulate_run(schedule, out.measured.costs);
  out.trace_run.closed = out.simulated.closed;
  out.simulated.title = "simulated with the measured costs: " + out.simulated.title;
  return out;
}

Color action_color(ActionType type, int microbatch) {
  const Color hue = chunk_color(microbatch % 16);
  switch (type) {
    case ActionType::kForward: return hue;
    case ActionType::kBackward: return mix(hue, rgb(0, 0, 0), 0.45f);
    case ActionType::kBackwardInput: return mix(hue, rgb(0, 0, 0), 0.3f);
    default: return mix(hue, rgb(255, 255, 255), 0.45f);  // W
  }
}

std::string action_label(const ActionBox& box, int ranks, int stages_per_rank) {
  std::string label = pipeline::type_name(box.type) + std::to_string(box.microbatch);
  if (stages_per_rank > 1) label += "." + std::to_string(box.stage / std::max(1, ranks));
  return label;
}

}  // namespace distlab::viz
