#include "memory_model.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace distlab::viz {
namespace {

// "123" -> 123; a foreign counter's "1.5e3" -> 1500; anything else 0.
int64_t value_of(const std::string& text) {
  if (text.empty()) return 0;
  errno = 0;
  char* end = nullptr;
  const long long whole = std::strtoll(text.c_str(), &end, 10);
  if (errno == 0 && end == text.c_str() + text.size()) return whole;
  errno = 0;
  const double real = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(real)) return 0;
  constexpr double kLimit = 9.2e18;  // inside int64_t
  return static_cast<int64_t>(std::llround(std::clamp(real, -kLimit, kLimit)));
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

}  // namespace

std::optional<MemoryCounterName> parse_memory_counter(const std::string& name) {
  for (const auto& [prefix, kind] : {std::pair{std::string(kMeasuredCounterPrefix), MemoryKind::kMeasured},
                                     std::pair{std::string(kAccountingCounterPrefix), MemoryKind::kAccounting}}) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.size() == prefix.size()) {
      // A formula needs its stage; a bare "memory" is a measurement of none.
      if (kind == MemoryKind::kAccounting) return std::nullopt;
      return MemoryCounterName{kind, ""};
    }
    if (name[prefix.size()] != ' ' || name.size() == prefix.size() + 1) return std::nullopt;
    return MemoryCounterName{kind, name.substr(prefix.size() + 1)};
  }
  return std::nullopt;
}

int64_t MemorySample::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum = saturating_add(sum, b);
  return sum;
}

MemorySample memory_sample_of(const trace::Event& counter) {
  MemorySample sample;
  sample.at_us = counter.begin_us;
  sample.rank = counter.rank;
  for (const auto& [key, value] : counter.args)
    for (int s = 0; s < kMemorySeriesCount; ++s)
      if (key == kMemorySeries[s]) sample.bytes[s] = value_of(value);  // a repeated key: its last value
  return sample;
}

bool MemoryModel::add(const trace::Event& event) {
  if (!event.is_counter()) return false;
  const std::optional<MemoryCounterName> name = parse_memory_counter(event.name);
  if (!name) return false;

  const auto index = static_cast<uint32_t>(samples_.size());
  samples_.push_back(memory_sample_of(event));
  const MemorySample& sample = samples_.back();
  auto [it, added] = stage_index_.try_emplace(name->stage, static_cast<uint32_t>(stages_.size()));
  if (added) stages_.push_back(Stage{name->stage, sample.at_us, it->second, {}});
  Stage& stage = stages_[it->second];
  stage.first_us = std::min(stage.first_us, sample.at_us);
  PerRank& rank = stage.ranks[sample.rank];

  if (name->kind == MemoryKind::kAccounting) {
    // The latest formula; one recorded at the same time later wins too.
    if (!rank.accounting || samples_[*rank.accounting].at_us <= sample.at_us) rank.accounting = index;
    max_accounting_ = std::max(max_accounting_, sample.total());
    return true;
  }
  ++rank.measured;
  // The peak; of equal totals the earliest.
  if (!rank.peak) {
    rank.peak = index;
  } else {
    const MemorySample& best = samples_[*rank.peak];
    if (sample.total() > best.total() || (sample.total() == best.total() && sample.at_us < best.at_us))
      rank.peak = index;
  }
  max_measured_ = std::max(max_measured_, sample.total());
  // Samples of one rank mostly come in time order: insert from the back.
  std::vector<MemoryPoint>& line = timelines_[sample.rank];
  const MemoryPoint point{sample.at_us, sample.total(), it->second, index};
  auto at = line.end();
  while (at != line.begin() && (at - 1)->at_us > point.at_us) --at;
  line.insert(at, point);
  return true;
}

std::vector<std::string> MemoryModel::stages() const {
  std::vector<const Stage*> order;
  for (const Stage& s : stages_) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Stage* a, const Stage* b) {
    return a->first_us != b->first_us ? a->first_us < b->first_us : a->order < b->order;
  });
  std::vector<std::string> names;
  for (const Stage* s : order) names.push_back(s->name);
  return names;
}

const MemoryModel::Stage* MemoryModel::find_stage(const std::string& name) const {
  auto it = stage_index_.find(name);
  return it == stage_index_.end() ? nullptr : &stages_[it->second];
}

const MemoryModel::PerRank* MemoryModel::find(const std::string& stage, int rank) const {
  const Stage* s = find_stage(stage);
  if (s == nullptr) return nullptr;
  auto it = s->ranks.find(rank);
  return it == s->ranks.end() ? nullptr : &it->second;
}

std::vector<int> MemoryModel::ranks_of(const std::string& stage) const {
  std::vector<int> ranks;
  if (const Stage* s = find_stage(stage))
    for (const auto& [rank, unused] : s->ranks) ranks.push_back(rank);
  return ranks;
}

std::optional<MemorySample> MemoryModel::peak(const std::string& stage, int rank) const {
  const PerRank* r = find(stage, rank);
  if (r == nullptr || !r->peak) return std::nullopt;
  return samples_[*r->peak];
}

std::optional<MemorySample> MemoryModel::accounting(const std::string& stage, int rank) const {
  const PerRank* r = find(stage, rank);
  if (r == nullptr || !r->accounting) return std::nullopt;
  return samples_[*r->accounting];
}

size_t MemoryModel::measured_count(const std::string& stage, int rank) const {
  const PerRank* r = find(stage, rank);
  return r == nullptr ? 0 : r->measured;
}

std::vector<int> MemoryModel::timeline_ranks() const {
  std::vector<int> ranks;
  for (const auto& [rank, unused] : timelines_) ranks.push_back(rank);
  return ranks;
}

const std::vector<MemoryPoint>& MemoryModel::timeline(int rank) const {
  static const std::vector<MemoryPoint> kNone;
  auto it = timelines_.find(rank);
  return it == timelines_.end() ? kNone : it->second;
}

}  // namespace distlab::viz
