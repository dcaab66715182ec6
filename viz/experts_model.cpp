#include "experts_model.hpp"

#include <algorithm>
#include <numeric>

namespace distlab::viz {

namespace {

// "kept 12" -> 12 when the name is `prefix` and a number; -1 otherwise.
int expert_of(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 6)
    return -1;
  return std::stoi(digits);
}

int64_t number(const std::string& text) {
  try {
    return std::stoll(text);
  } catch (...) {
    return 0;
  }
}

void put(std::vector<int64_t>& v, int e, int64_t value) {
  if (static_cast<size_t>(e) >= v.size()) v.resize(static_cast<size_t>(e) + 1, 0);
  v[static_cast<size_t>(e)] = value;
}

void add_into(std::vector<int64_t>& into, const std::vector<int64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t e = 0; e < from.size(); ++e) into[e] += from[e];
}

}  // namespace

int64_t ExpertStep::kept_total() const { return std::accumulate(kept.begin(), kept.end(), int64_t{0}); }
int64_t ExpertStep::dropped_total() const { return std::accumulate(dropped.begin(), dropped.end(), int64_t{0}); }

std::optional<ExpertSample> expert_sample_of(const trace::Event& event) {
  const std::string prefix = kExpertsCounterPrefix;
  if (!event.is_counter() || event.name.rfind(prefix, 0) != 0 || event.name.size() == prefix.size())
    return std::nullopt;
  ExpertSample sample;
  sample.label = event.name.substr(prefix.size());
  for (const auto& [name, value] : event.args) {
    if (name == "capacity") sample.capacity = number(value);
    if (const int e = expert_of(name, "kept "); e >= 0) put(sample.kept, e, number(value));
    if (const int e = expert_of(name, "dropped "); e >= 0) put(sample.dropped, e, number(value));
  }
  const size_t experts = std::max(sample.kept.size(), sample.dropped.size());
  sample.kept.resize(experts, 0);
  sample.dropped.resize(experts, 0);
  return sample;
}

void ExpertsModel::add(const trace::Event& event) {
  std::optional<ExpertSample> sample = expert_sample_of(event);
  if (!sample) return;
  std::vector<ExpertStep>& steps = steps_[sample->label];
  if (steps.empty() && std::find(labels_.begin(), labels_.end(), sample->label) == labels_.end())
    labels_.push_back(sample->label);
  const size_t n = next_[{sample->label, event.rank}]++;
  if (steps.size() <= n) steps.resize(n + 1);
  ExpertStep& step = steps[n];
  add_into(step.kept, sample->kept);
  add_into(step.dropped, sample->dropped);
  step.capacity = sample->capacity;
  ++step.ranks;
}

void ExpertsModel::clear() {
  labels_.clear();
  steps_.clear();
  next_.clear();
}

const std::vector<ExpertStep>& ExpertsModel::steps(const std::string& label) const {
  static const std::vector<ExpertStep> none;
  const auto it = steps_.find(label);
  return it == steps_.end() ? none : it->second;
}

int64_t ExpertsModel::largest(const std::string& label) const {
  int64_t most = 0;
  for (const ExpertStep& step : steps(label))
    for (size_t e = 0; e < step.kept.size(); ++e)
      most = std::max(most, step.kept[e] + (e < step.dropped.size() ? step.dropped[e] : 0));
  return most;
}

}  // namespace distlab::viz
