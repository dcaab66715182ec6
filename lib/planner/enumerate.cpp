#include "planner/enumerate.hpp"

#include <cctype>

#include "pipeline/schedule_kinds.hpp"
#include "planner/memory_model.hpp"

namespace distlab::planner {

std::vector<train::Layout> layouts_of(int world) {
  std::vector<train::Layout> out;
  for (int p = 1; p <= world; ++p)
    for (int r = 1; p * r <= world; ++r)
      for (int c = 1; p * r * c <= world; ++c)
        if (world % (p * r * c) == 0) out.push_back(train::Layout{p, r, world / (p * r * c), c});
  return out;
}

namespace {

std::vector<pipeline::ScheduleKind> kinds_of(const SearchSpace& space) {
  if (!space.schedules.empty()) return space.schedules;
  std::vector<pipeline::ScheduleKind> all;
  for (const pipeline::KindInfo& info : pipeline::kind_table()) all.push_back(info.kind);
  return all;
}

std::vector<int> vs_of(pipeline::ScheduleKind kind, const SearchSpace& space) {
  switch (pipeline::kind_info(kind).stages_per_rank) {
    case pipeline::StagesPerRank::kOne: return {1};
    case pipeline::StagesPerRank::kTwo: return {2};
    case pipeline::StagesPerRank::kAny: return space.stages_per_rank;
  }
  return {1};
}

}  // namespace

std::vector<Choice> candidates(const ModelShape& model, const SearchSpace& space) {
  std::vector<Choice> out;
  std::vector<int> expert_over = {1};
  if (model.lm.moe.enabled())
    for (int n = 2; n <= space.world; ++n)
      if (space.world % n == 0) expert_over.push_back(n);
  for (const train::Layout& layout : layouts_of(space.world))
    for (const pipeline::ScheduleKind kind : kinds_of(space)) {
      if (layout.pipeline == 1 && kind != pipeline::ScheduleKind::k1F1B) continue;
      for (const int v : vs_of(kind, space))
        for (const int64_t m : space.microbatches) {
          if (m > model.batch / layout.replicas) continue;  // the trainer would clip it to another candidate's
          for (const int zero : space.zero) {
            if (zero > 0 && layout.replicas * layout.context == 1) continue;  // nothing to shard over
            for (const int n : expert_over)
              for (const memory::Recompute recompute : space.recompute)
                for (const memory::Precision precision : space.precision) {
                  Choice c;
                  c.layout = layout;
                  c.pipeline = {kind, v, m};
                  c.data.zero = zero;
                  c.experts.parallel = n;
                  c.memory.recompute = recompute, c.memory.precision = precision;
                  out.push_back(c);
                }
          }
        }
    }
  return out;
}

std::vector<std::string> plan_refusals(const ModelShape& model, const Choice& choice) {
  return plan_of(model, choice).refusals();
}

std::string refusal_rule(const std::string& refusal) {
  std::string rule;
  for (const char ch : refusal) {
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      if (rule.empty() || rule.back() != '#') rule += '#';
    } else {
      rule += ch;
    }
  }
  return rule;
}

Enumeration enumerate(const ModelShape& model, const SearchSpace& space, int64_t cap_bytes) {
  Enumeration e;
  for (const Choice& choice : candidates(model, space)) {
    const std::vector<std::string> refusals = plan_refusals(model, choice);
    if (!refusals.empty()) {
      ++e.refused[refusal_rule(refusals.front())];
      ++e.refused_total;
      continue;
    }
    if (cap_bytes > 0) {
      const int64_t worst = predict_memory(model, choice).worst().total();
      if (worst > cap_bytes) {
        if (e.over_cap == 0 || worst < e.smallest_over_cap) e.smallest_over_cap = worst;
        ++e.over_cap;
        continue;
      }
    }
    e.accepted.push_back(choice);
  }
  return e;
}

}  // namespace distlab::planner
