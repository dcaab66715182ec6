// A plan as `distlab-plan --record FILE` writes it, read for the Plan panel,
// and what the panel shows of it: each measured layout's error and the
// scores. No drawing in here.
//
// The schema is the comment at the top of planner/record.hpp: one object,
// "format": "distlab-plan", "version": 1, the run's preset, ranks and
// profile, and "layouts" (the top rows of the predicted ranking, then every
// measured one, by place), each with its predicted step time, its predicted
// memory per pipeline rank and, when it ran, what was measured. Fields this
// reader does not know are ignored, and so are the file's own "scores":
// they are computed again here from the layouts (plan_scores).
//
// Anything else is refused with one PlanFormatError whose message names
// what is wrong: not JSON, cut short, another format or version, a field
// missing or of the wrong type, negative bytes, a layout without memory
// ranks, ...
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace distlab::viz {

inline constexpr const char* kPlanFormat = "distlab-plan";
inline constexpr int kPlanVersion = 1;

class PlanFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a pipeline rank holds while it trains, stacked in this order (bottom
// first); the record's field names.
inline constexpr int kPlanCategoryCount = 8;
inline constexpr std::array<const char*, kPlanCategoryCount> kPlanCategories = {
    "parameters", "gradients", "gradient_shard", "optimizer_state", "buffers", "activations", "backward_scratch", "data"};
// The same as the panel says them ("gradient shard").
std::string plan_category_label(int category);

struct PlanRankMemory {
  int pipeline_rank = 0;
  std::array<int64_t, kPlanCategoryCount> bytes{};  // kPlanCategories order
  int64_t data_setup = 0;                           // the whole training matrix, alive at set-up only
  int64_t total = 0;  // the rank's peak as the record says: training or set-up, the larger

  int64_t stacked() const;  // the categories added up: while it trains
};

struct PlanPrediction {
  double step_ms = 0, critical_ms = 0, packed_ms = 0;
  double bubble = 0, mfu = 0;
  int64_t wire_bytes = 0;
  int64_t job_bytes = 0;  // every rank's peak added up, the whole job
};

struct PlanMeasurement {
  bool ok = false;
  std::string error;  // why it failed (ok false)
  double median_ms = 0, low_ms = 0, high_ms = 0;
  std::vector<double> steps_ms;
  int64_t metered_bytes = 0;  // the allocator meter's peak, the whole job
  int64_t peak_rss_bytes = 0;
};

struct PlanLayout {
  int place = 0;  // 1-based, in the predicted ranking
  std::string name, command;
  int pipeline = 1, replicas = 1, context = 1, tensor = 1;
  PlanPrediction predicted;
  std::vector<PlanRankMemory> memory;       // one per pipeline rank, by pipeline_rank
  std::optional<PlanMeasurement> measured;  // absent: not run

  bool ran() const { return measured && measured->ok; }
  bool failed() const { return measured && !measured->ok; }
  // (predicted - measured) / measured of the step time; only when ran().
  double error() const;
  // (predicted - metered) / metered of the job's bytes; only when ran() and
  // something was metered.
  std::optional<double> memory_error() const;
};

struct PlanProfile {
  std::string path, machine, date, device;  // device: empty when the record has none
  int cores = 0;
};

// How good the prediction was over the layouts that ran (planner/scores.hpp
// computes them, as distlab-plan prints them):
//   error     mean and worst of |predicted - measured| / measured
//   spearman  the rank correlation of predicted and measured step times,
//             ties sharing their mean rank (0 when either side is all ties)
//   regret    measured[the one predicted fastest] / the fastest measured - 1
//             (of equal predictions, the first by place)
// and the same errors of the job's bytes over those that metered any.
struct PlanScores {
  int layouts = 0;
  double mean_abs_error = 0, worst_abs_error = 0;
  double spearman = 0, regret = 0;
  int memory_layouts = 0;
  double memory_mean_abs_error = 0, memory_worst_abs_error = 0;
};

struct PlanRecord {
  std::string preset;
  int ranks = 0;
  int64_t batch = 0, bptt = 0;
  PlanProfile profile;
  int64_t accepted = 0, refused = 0;
  double predict_seconds = 0;
  std::vector<PlanLayout> layouts;  // by place

  // Indices into layouts: those that ran, those that failed.
  std::vector<int> ran() const;
  std::vector<int> failed() const;
  int measured_count() const { return static_cast<int>(ran().size() + failed().size()); }
  // Over the layouts that ran; nothing when fewer than 2 did.
  std::optional<PlanScores> scores() const;
  // The largest bar of any layout (a rank's categories or its total).
  int64_t max_rank_bytes() const;
  // "6 layouts, 2 measured (1 failed)"
  std::string summary() const;
};

// Throw PlanFormatError; read_plan_file's message begins with the path.
PlanRecord read_plan_text(const std::string& text);
PlanRecord read_plan_file(const std::string& path);

// Whether `head` (a file, or its beginning) is a plan record: JSON whose
// top-level object has "format": "distlab-plan" before the text ends. A
// trace (an array, or an object whose "traceEvents" come first) is decided
// at once, without reading on.
bool looks_like_plan_record(std::string_view head);

}  // namespace distlab::viz
