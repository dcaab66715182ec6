#include "wire_model.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

namespace distlab::viz {
namespace {

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// A world rank: digits only (no sign), at most 9 of them.
std::optional<int> rank_of(const std::string& text) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), digit)) return std::nullopt;
  return std::stoi(text);
}

// The whole of `text` as a decimal integer, or nothing.
std::optional<int64_t> integer_of(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end) return std::nullopt;
  return value;
}

// The ring and the sample in `event` (a ring counter), or why not.
struct Read {
  RingId id;
  WireSample sample;
  std::optional<WireFault> fault;
};

Read read_sample(const trace::Event& event, const std::string& ring_name) {
  Read r;
  const auto fail = [&r](WireFault fault) {
    r.fault = fault;
    return r;
  };
  const std::optional<RingId> id = parse_ring_id(ring_name);
  if (!id) return fail(WireFault::kBadName);
  r.id = *id;
  std::optional<std::string> texts[3];  // head, tail, capacity
  for (const auto& [name, value] : event.args) {
    if (name == "head") texts[0] = value;
    if (name == "tail") texts[1] = value;
    if (name == "capacity") texts[2] = value;
  }
  int64_t values[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    if (!texts[i]) return fail(WireFault::kMissingSeries);
    const std::optional<int64_t> v = integer_of(*texts[i]);
    if (!v) return fail(WireFault::kNotANumber);
    values[i] = *v;
  }
  WireSample& s = r.sample;
  s.head = values[0];
  s.tail = values[1];
  s.capacity = values[2];
  s.rank = event.rank;
  s.at_us = event.begin_us;
  if (s.rank != id->from && s.rank != id->to) r.fault = WireFault::kWrongRank;
  else if (s.head < 0 || s.tail < 0) r.fault = WireFault::kNegative;
  else if (s.capacity <= 0) r.fault = WireFault::kNoCapacity;
  else if (s.tail > s.head) r.fault = WireFault::kTailPastHead;
  else if (s.head - s.tail > s.capacity) r.fault = WireFault::kOverfull;
  return r;
}

}  // namespace

std::optional<RingId> parse_ring_id(const std::string& text) {
  const size_t arrow = text.find("->");
  if (arrow == std::string::npos) return std::nullopt;
  // After the arrow: D, then the label in parentheses, if any.
  std::string rest = trimmed(text.substr(arrow + 2));
  std::string label;
  if (const size_t open = rest.find('('); open != std::string::npos) {
    if (rest.back() != ')' || open + 2 >= rest.size()) return std::nullopt;
    label = rest.substr(open + 1, rest.size() - open - 2);
    rest = trimmed(rest.substr(0, open));
  }
  const std::optional<int> from = rank_of(trimmed(text.substr(0, arrow)));
  const std::optional<int> to = rank_of(rest);
  if (!from || !to || *from == *to) return std::nullopt;
  return RingId{*from, *to, label};
}

std::string ring_label(const RingId& id) {
  const std::string pair = std::to_string(id.from) + "->" + std::to_string(id.to);
  return id.label.empty() ? pair : pair + " (" + id.label + ")";
}

WireView wire_view(const WireSample& s) {
  WireView v;
  const double capacity = static_cast<double>(s.capacity);
  v.occupied = s.head - s.tail;
  v.fill = static_cast<double>(v.occupied) / capacity;
  v.tail_at = s.tail % s.capacity;
  v.head_at = s.head % s.capacity;
  v.tail_turn = static_cast<double>(v.tail_at) / capacity;
  v.head_turn = static_cast<double>(v.head_at) / capacity;
  v.moved = s.tail;
  return v;
}

const char* to_string(WireFault fault) {
  switch (fault) {
    case WireFault::kBadName: return "name not \"shm ring S->D (LABEL)\"";
    case WireFault::kMissingSeries: return "missing series";
    case WireFault::kNotANumber: return "not a number";
    case WireFault::kWrongRank: return "rank neither S nor D";
    case WireFault::kNegative: return "negative head or tail";
    case WireFault::kNoCapacity: return "capacity 0";
    case WireFault::kTailPastHead: return "tail > head";
    case WireFault::kOverfull: return "head - tail > capacity";
  }
  return "?";
}

WireModel::WireModel(const std::vector<trace::Event>& events) {
  const std::string prefix = kWireCounterPrefix;
  std::map<RingId, std::vector<WireSample>> rings;  // in input order until sorted below
  for (const trace::Event& e : events) {
    if (!e.is_counter() || e.name.compare(0, prefix.size(), prefix) != 0) continue;
    const Read r = read_sample(e, e.name.substr(prefix.size()));
    if (r.fault) {
      ++skipped_[static_cast<size_t>(*r.fault)];
      continue;
    }
    rings[r.id].push_back(r.sample);
  }
  for (auto& [id, samples] : rings) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const WireSample& a, const WireSample& b) { return a.at_us < b.at_us; });
    origin_us_ = rings_.empty() ? samples.front().at_us : std::min(origin_us_, samples.front().at_us);
    rings_.push_back(WireRing{id, std::move(samples)});
  }
  // One pair's rings (a communicator's after another's) in the order they began.
  std::stable_sort(rings_.begin(), rings_.end(), [](const WireRing& a, const WireRing& b) {
    if (a.id.from != b.id.from || a.id.to != b.id.to) return a.id < b.id;
    return a.samples.front().at_us < b.samples.front().at_us;
  });
}

int WireRing::fullest() const {
  int best = 0;
  for (size_t i = 1; i < samples.size(); ++i)
    if (samples[i].head - samples[i].tail > samples[best].head - samples[best].tail) best = static_cast<int>(i);
  return best;
}

int WireModel::find(const RingId& id) const {
  int found = -1;
  int64_t most = -1;
  for (size_t i = 0; i < rings_.size(); ++i) {
    const RingId& r = rings_[i].id;
    if (r.from != id.from || r.to != id.to) continue;
    if (!id.label.empty()) {
      if (r.label == id.label) return static_cast<int>(i);
      continue;
    }
    int64_t moved = 0;  // tail only grows: the most of any sample
    for (const WireSample& s : rings_[i].samples) moved = std::max(moved, s.tail);
    if (moved > most) {
      most = moved;
      found = static_cast<int>(i);
    }
  }
  return found;
}

int64_t WireModel::skipped() const { return std::accumulate(skipped_.begin(), skipped_.end(), int64_t{0}); }

std::string WireModel::skipped_text() const {
  const int64_t all = skipped();
  if (all == 0) return {};
  std::string text = std::to_string(all) + (all == 1 ? " sample" : " samples") + " skipped:";
  bool first = true;
  for (int f = 0; f < kWireFaultCount; ++f) {
    if (skipped_[static_cast<size_t>(f)] == 0) continue;
    text += (first ? " " : ", ") + std::to_string(skipped_[static_cast<size_t>(f)]) + " " +
            to_string(static_cast<WireFault>(f));
    first = false;
  }
  return text;
}

}  // namespace distlab::viz
