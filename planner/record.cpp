#include "record.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace distlab::planner {

namespace {

using nlohmann::json;

json memory_json(const MemoryPrediction& memory) {
  json ranks = json::array();
  for (const RankMemory& m : memory.ranks)
    ranks.push_back({{"pipeline_rank", m.pipeline_rank},
                     {"parameters", m.parameters},
                     {"gradients", m.gradients},
                     {"gradient_shard", m.gradient_shard},
                     {"optimizer_state", m.optimizer_state},
                     {"buffers", m.buffers},
                     {"activations", m.activations},
                     {"backward_scratch", m.backward_scratch},
                     {"data", m.data},
                     {"data_setup", m.data_setup},
                     {"build", m.build},
                     {"total", m.total()}});
  return ranks;
}

json measured_json(const Measured& m) {
  if (!m.ok) return {{"ok", false}, {"error", m.error}};
  json steps = json::array();
  for (const double s : m.step_s) steps.push_back(s * 1e3);
  return {{"ok", true},          {"median_ms", m.median_s * 1e3},     {"low_ms", m.low_s * 1e3},
          {"high_ms", m.high_s * 1e3}, {"steps_ms", steps},            {"metered_bytes", m.metered_bytes},
          {"peak_rss_bytes", m.peak_rss_bytes}};
}

json layout_json(size_t place, const Ranked& r) {
  const train::Layout& l = r.choice.layout;
  return {{"place", place},
          {"name", choice_name(r.choice)},
          {"command", r.command},
          {"pipeline", l.pipeline},
          {"replicas", l.replicas},
          {"context", l.context},
          {"tensor", l.tensor},
          {"predicted",
           {{"step_ms", r.time.step_s * 1e3},
            {"critical_ms", r.time.critical_s * 1e3},
            {"packed_ms", r.time.packed_s * 1e3},
            {"bubble", r.time.bubble},
            {"wire_bytes", r.time.wire_bytes},
            {"mfu", r.time.mfu},
            {"job_bytes", job_bytes(r)}}},
          {"memory", memory_json(r.memory)}};
}

}  // namespace

void write_plan_record(const std::string& path, const ModelShape& model, const Profile& profile,
                       const PlanHeader& header, const std::vector<Ranked>& ranked, size_t top,
                       const std::vector<MeasuredRow>& measured) {
  std::map<size_t, json> by_place;  // place -> layout, each once
  for (size_t i = 0; i < std::min(top, ranked.size()); ++i) by_place[i + 1] = layout_json(i + 1, ranked[i]);
  for (const MeasuredRow& row : measured) {
    json& layout = by_place[row.rank];
    if (layout.is_null()) layout = layout_json(row.rank, row.predicted);
    // --fail-one runs one layout twice (the second made to fail): the first run is the layout's.
    if (!layout.contains("measured")) layout["measured"] = measured_json(row.measured);
  }
  json layouts = json::array();
  for (auto& [place, layout] : by_place) layouts.push_back(std::move(layout));
  json out = {{"format", "distlab-plan"},
              {"version", 1},
              {"preset", model.preset},
              {"ranks", header.ranks},
              {"batch", model.batch},
              {"bptt", model.bptt},
              {"profile",
               {{"path", header.profile_path},
                {"machine", profile.machine},
                {"date", profile.date},
                {"cores", profile.cores},
                {"device", profile.device}}},
              {"accepted", header.accepted},
              {"refused", header.refused},
              {"predict_seconds", header.predict_seconds},
              {"layouts", std::move(layouts)}};
  const RowScores scores = score_rows(measured);
  if (scores.time.layouts >= 2)
    out["scores"] = {{"layouts", scores.time.layouts},
                     {"mean_abs_error", scores.time.mean_abs_error},
                     {"worst_abs_error", scores.time.worst_abs_error},
                     {"spearman", scores.time.spearman},
                     {"regret", scores.time.regret},
                     {"memory_mean_abs_error", scores.memory.mean_abs_error},
                     {"memory_worst_abs_error", scores.memory.worst_abs_error}};
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << out.dump(1) << "\n";
    if (!file) throw std::runtime_error("plan record " + path + ": cannot be written");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("plan record " + path + ": cannot be renamed into place");
}

}  // namespace distlab::planner
