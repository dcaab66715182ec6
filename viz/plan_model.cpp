#include "plan_model.hpp"

#include "planner/scores.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

namespace distlab::viz {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 32;                          // the schema needs 5
constexpr int64_t kMaxFileBytes = int64_t{256} << 20;  // a record of a few thousand layouts is a few MB

// What a value is, for a message: its text when short, else its kind.
std::string described(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      return s.size() <= 24 ? json(s).dump() + " (a string)" : "a string";
    }
    case json::value_t::null:
      return "null";
    default:
      return v.dump();  // a number or a boolean
  }
}

// The fields of one object of the record, each read with its path
// ("layouts[2].predicted.step_ms") for the message that refuses it.
class Fields {
 public:
  Fields(const json& value, std::string where) : value_(value), where_(std::move(where)) {
    if (!value_.is_object()) throw PlanFormatError(where_ + ": " + described(value_) + ", expected an object");
  }
  std::string path(const char* key) const { return where_.empty() ? key : where_ + "." + key; }
  const json* find(const char* key) const {
    const auto it = value_.find(key);
    return it == value_.end() ? nullptr : &*it;
  }
  const json& get(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) throw PlanFormatError(path(key) + ": missing");
    return *v;
  }
  [[noreturn]] void wrong(const char* key, const std::string& expected) const {
    throw PlanFormatError(path(key) + ": " + described(get(key)) + ", expected " + expected);
  }
  std::string text(const char* key) const {
    const json& v = get(key);
    if (!v.is_string()) wrong(key, "a string");
    return v.get<std::string>();
  }
  bool flag(const char* key) const {
    const json& v = get(key);
    if (!v.is_boolean()) wrong(key, "true or false");
    return v.get<bool>();
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi = INT64_MAX) const {
    const json& v = get(key);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      wrong(key, "an integer below 2^63");
    if (!v.is_number_integer()) wrong(key, "an integer");
    const int64_t n = v.get<int64_t>();
    if (n < lo)
      throw PlanFormatError(path(key) + ": " + std::to_string(n) + ", expected at least " + std::to_string(lo));
    if (n > hi)
      throw PlanFormatError(path(key) + ": " + std::to_string(n) + ", expected at most " + std::to_string(hi));
    return n;
  }
  int count(const char* key, int lo) const { return static_cast<int>(integer(key, lo, INT_MAX)); }
  int64_t bytes(const char* key) const {
    const json& v = get(key);
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)
      throw PlanFormatError(path(key) + ": " + std::to_string(v.get<int64_t>()) + " bytes (negative)");
    return integer(key, 0);
  }
  // A number >= lo (> lo when `above`).
  double number(const char* key, double lo, bool above = false) const {
    const json& v = get(key);
    if (!v.is_number()) wrong(key, "a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || (above && x == lo)) {
      char bound[32];
      std::snprintf(bound, sizeof bound, "%g", lo);
      throw PlanFormatError(path(key) + ": " + v.dump() + ", expected " + (above ? "more than " : "at least ") + bound);
    }
    return x;
  }
  Fields object(const char* key) const { return Fields(get(key), path(key)); }
  const json& array(const char* key) const {
    const json& v = get(key);
    if (!v.is_array()) wrong(key, "an array");
    return v;
  }

 private:
  const json& value_;
  std::string where_;
};

PlanRankMemory read_rank(const json& value, const std::string& where, int pipeline) {
  const Fields f(value, where);
  PlanRankMemory m;
  m.pipeline_rank = static_cast<int>(f.integer("pipeline_rank", 0, pipeline - 1));
  for (int c = 0; c < kPlanCategoryCount; ++c) {
    const char* key = kPlanCategories[static_cast<size_t>(c)];
    // Records written before the first stages' scratch was predicted call
    // the last stage's "loss_gradient".
    if (std::string(key) == "backward_scratch" && !value.contains(key)) key = "loss_gradient";
    m.bytes[static_cast<size_t>(c)] = f.bytes(key);
  }
  m.data_setup = f.bytes("data_setup");
  m.total = f.bytes("total");
  return m;
}

PlanMeasurement read_measured(const Fields& f) {
  PlanMeasurement m;
  m.ok = f.flag("ok");
  if (!m.ok) {
    m.error = f.text("error");
    return m;
  }
  m.median_ms = f.number("median_ms", 0, true);
  m.low_ms = f.number("low_ms", 0);
  m.high_ms = f.number("high_ms", 0);
  const json& steps = f.array("steps_ms");
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].is_number() || steps[i].get<double>() < 0)
      throw PlanFormatError(f.path("steps_ms") + "[" + std::to_string(i) + "]: " + described(steps[i]) +
                            ", expected a number of ms, at least 0");
    m.steps_ms.push_back(steps[i].get<double>());
  }
  m.metered_bytes = f.bytes("metered_bytes");
  m.peak_rss_bytes = f.bytes("peak_rss_bytes");
  return m;
}

PlanLayout read_layout(const json& value, const std::string& where) {
  const Fields f(value, where);
  PlanLayout l;
  l.place = f.count("place", 1);
  l.name = f.text("name");
  l.command = f.text("command");
  l.pipeline = f.count("pipeline", 1);
  l.replicas = f.count("replicas", 1);
  l.context = f.count("context", 1);
  l.tensor = f.count("tensor", 1);
  const Fields p = f.object("predicted");
  l.predicted.step_ms = p.number("step_ms", 0);
  l.predicted.critical_ms = p.number("critical_ms", 0);
  l.predicted.packed_ms = p.number("packed_ms", 0);
  l.predicted.bubble = p.number("bubble", 0);
  l.predicted.wire_bytes = p.bytes("wire_bytes");
  l.predicted.mfu = p.number("mfu", 0);
  l.predicted.job_bytes = p.bytes("job_bytes");
  const json& memory = f.array("memory");
  if (memory.empty()) throw PlanFormatError(f.path("memory") + ": no pipeline ranks (an empty list)");
  if (memory.size() != static_cast<size_t>(l.pipeline))
    throw PlanFormatError(f.path("memory") + ": " + std::to_string(memory.size()) + " ranks for a pipeline of " +
                          std::to_string(l.pipeline) + " (one per pipeline rank)");
  std::vector<bool> seen(static_cast<size_t>(l.pipeline), false);
  for (size_t i = 0; i < memory.size(); ++i) {
    const std::string at = f.path("memory") + "[" + std::to_string(i) + "]";
    l.memory.push_back(read_rank(memory[i], at, l.pipeline));
    const int rank = l.memory.back().pipeline_rank;
    if (seen[static_cast<size_t>(rank)])
      throw PlanFormatError(at + ".pipeline_rank: " + std::to_string(rank) + " again (one entry per pipeline rank)");
    seen[static_cast<size_t>(rank)] = true;
  }
  std::sort(l.memory.begin(), l.memory.end(),
            [](const PlanRankMemory& a, const PlanRankMemory& b) { return a.pipeline_rank < b.pipeline_rank; });
  if (f.find("measured") != nullptr) l.measured = read_measured(f.object("measured"));
  return l;
}

json parse_json(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw PlanFormatError("empty: no JSON at all");
  // The parser is not recursive; nesting is bounded all the same, as nothing
  // in a plan nests deeper than a few levels.
  const json::parser_callback_t depth = [](int level, json::parse_event_t, json&) {
    if (level > kMaxDepth)
      throw PlanFormatError("nested deeper than " + std::to_string(kMaxDepth) + " levels: not a plan record");
    return true;
  };
  try {
    return json::parse(text, depth);
  } catch (const json::parse_error& e) {
    const size_t last = text.find_last_not_of(" \t\r\n");
    if (e.byte > last + 1)
      throw PlanFormatError("cut short: the JSON ends at byte " + std::to_string(last + 1) + " before the plan does");
    // Line and column of the byte the parser stopped at (1-based).
    const size_t at = std::min(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
    const size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    const size_t column = at - (line_start == std::string::npos || line == 1 ? 0 : line_start + 1) + 1;
    throw PlanFormatError("not JSON: a syntax error at line " + std::to_string(line) + ", column " +
                          std::to_string(column));
  } catch (const json::out_of_range& e) {  // a number past a double's (1e400)
    throw PlanFormatError(std::string("not JSON: ") + e.what());
  }
}

}  // namespace

std::string plan_category_label(int category) {
  std::string label = kPlanCategories[static_cast<size_t>(category)];
  std::replace(label.begin(), label.end(), '_', ' ');
  return label;
}

int64_t PlanRankMemory::stacked() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum = b > INT64_MAX - sum ? INT64_MAX : sum + b;
  return sum;
}

double PlanLayout::error() const { return (predicted.step_ms - measured->median_ms) / measured->median_ms; }

std::optional<double> PlanLayout::memory_error() const {
  if (!ran() || measured->metered_bytes <= 0) return std::nullopt;
  return (static_cast<double>(predicted.job_bytes) - static_cast<double>(measured->metered_bytes)) /
         static_cast<double>(measured->metered_bytes);
}

std::vector<int> PlanRecord::ran() const {
  std::vector<int> found;
  for (size_t i = 0; i < layouts.size(); ++i)
    if (layouts[i].ran()) found.push_back(static_cast<int>(i));
  return found;
}

std::vector<int> PlanRecord::failed() const {
  std::vector<int> found;
  for (size_t i = 0; i < layouts.size(); ++i)
    if (layouts[i].failed()) found.push_back(static_cast<int>(i));
  return found;
}

std::optional<PlanScores> PlanRecord::scores() const {
  std::vector<double> predicted, measured;
  for (int i : ran()) {
    predicted.push_back(layouts[static_cast<size_t>(i)].predicted.step_ms);
    measured.push_back(layouts[static_cast<size_t>(i)].measured->median_ms);
  }
  if (predicted.size() < 2) return std::nullopt;
  const planner::Scores time = planner::score(predicted, measured);
  PlanScores s;
  s.layouts = time.layouts;
  s.mean_abs_error = time.mean_abs_error;
  s.worst_abs_error = time.worst_abs_error;
  s.spearman = time.spearman;
  s.regret = time.regret;
  for (int i : ran()) {
    const std::optional<double> e = layouts[static_cast<size_t>(i)].memory_error();
    if (!e) continue;
    ++s.memory_layouts;
    s.memory_mean_abs_error += std::fabs(*e);
    s.memory_worst_abs_error = std::max(s.memory_worst_abs_error, std::fabs(*e));
  }
  if (s.memory_layouts > 0) s.memory_mean_abs_error /= s.memory_layouts;
  return s;
}

int64_t PlanRecord::max_rank_bytes() const {
  int64_t most = 0;
  for (const PlanLayout& l : layouts)
    for (const PlanRankMemory& m : l.memory) most = std::max({most, m.stacked(), m.total});
  return most;
}

std::string PlanRecord::summary() const {
  const size_t failures = failed().size();
  std::string text = std::to_string(layouts.size()) + (layouts.size() == 1 ? " layout, " : " layouts, ") +
                     std::to_string(measured_count()) + " measured";
  if (failures > 0) text += " (" + std::to_string(failures) + " failed)";
  return text;
}

PlanRecord read_plan_text(const std::string& text) {
  const json doc = parse_json(text);
  if (!doc.is_object()) throw PlanFormatError("not a plan record: the JSON is " + described(doc) + ", not an object");
  const Fields top(doc, "");
  const json* format = top.find("format");
  if (format == nullptr)
    throw PlanFormatError(std::string("not a plan record: no \"format\" (a plan record says \"format\": \"") +
                          kPlanFormat + "\")");
  if (!format->is_string() || format->get<std::string>() != kPlanFormat)
    throw PlanFormatError("not a plan record: \"format\" is " + described(*format) + ", not \"" + kPlanFormat + "\"");
  const json& version = top.get("version");
  if (!version.is_number_integer()) top.wrong("version", "an integer");
  if (version.get<int64_t>() != kPlanVersion)
    throw PlanFormatError("version " + version.dump() +
                          " of the plan record is not known here (this visualizer reads version " +
                          std::to_string(kPlanVersion) + ")");
  PlanRecord r;
  r.preset = top.text("preset");
  r.ranks = top.count("ranks", 1);
  r.batch = top.integer("batch", 1);
  r.bptt = top.integer("bptt", 1);
  const Fields profile = top.object("profile");
  r.profile.path = profile.text("path");
  r.profile.machine = profile.text("machine");
  r.profile.date = profile.text("date");
  r.profile.cores = profile.count("cores", 0);
  if (profile.find("device") != nullptr) r.profile.device = profile.text("device");
  r.accepted = top.integer("accepted", 0);
  r.refused = top.integer("refused", 0);
  r.predict_seconds = top.number("predict_seconds", 0);
  const json& layouts = top.array("layouts");
  std::map<int, size_t> places;  // place -> index in the file
  for (size_t i = 0; i < layouts.size(); ++i) {
    const std::string at = "layouts[" + std::to_string(i) + "]";
    r.layouts.push_back(read_layout(layouts[i], at));
    const auto [it, added] = places.emplace(r.layouts.back().place, i);
    if (!added)
      throw PlanFormatError(at + ".place: " + std::to_string(it->first) + " again (layouts[" +
                            std::to_string(it->second) + "] has it)");
  }
  std::sort(r.layouts.begin(), r.layouts.end(),
            [](const PlanLayout& a, const PlanLayout& b) { return a.place < b.place; });
  return r;
}

PlanRecord read_plan_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlanFormatError("plan " + path + ": cannot be opened");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kMaxFileBytes)
    throw PlanFormatError("plan " + path + ": " + std::to_string(size) + " bytes, more than a plan record holds (" +
                          std::to_string(kMaxFileBytes >> 20) + " MiB at most)");
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return read_plan_text(text.str());
  } catch (const PlanFormatError& e) {
    throw PlanFormatError("plan " + path + ": " + e.what());
  }
}

namespace {

// Reads the top-level object's keys until "format" is decided; stops (by
// returning false) at the first sign either way.
class PlanSniffer : public nlohmann::json_sax<json> {
 public:
  bool plan = false;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool string(string_t& s) override {
    if (depth_ == 1 && format_next_) {
      plan = s == kPlanFormat;
      return false;
    }
    return value();
  }
  bool start_object(std::size_t) override {
    if (!value()) return false;
    ++depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0 || !value()) return false;  // a trace's bare array of events
    ++depth_;
    return true;
  }
  bool end_object() override { return --depth_ > 0; }
  bool end_array() override { return --depth_ > 0; }
  bool key(string_t& k) override {
    if (depth_ != 1) return true;
    if (k == "traceEvents") return false;  // a trace
    format_next_ = k == "format";
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  // A value (or the start of one) at the current depth: "format" with
  // anything but a string says no.
  bool value() {
    if (depth_ == 1 && format_next_) return false;
    return true;
  }
  int depth_ = 0;
  bool format_next_ = false;
};

}  // namespace

bool looks_like_plan_record(std::string_view head) {
  PlanSniffer sniffer;
  json::sax_parse(head.begin(), head.end(), &sniffer);
  return sniffer.plan;
}

}  // namespace distlab::viz
