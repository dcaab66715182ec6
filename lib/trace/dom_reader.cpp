#include "trace/dom_reader.hpp"

#include <map>
#include <nlohmann/json.hpp>

namespace distlab::trace {
namespace {

using nlohmann::json;

[[noreturn]] void not_a_number(const json& j, const char* what) {
  throw TraceFormatError(std::string("field '") + what + "' is not a number in range: " + j.dump().substr(0, 80));
}

// Times, sizes and ids are whole numbers that fit in int64 with room to
// add two of them (a begin and a duration): |value| < 2^62.
constexpr int64_t kLargest = int64_t{1} << 62;

int64_t as_int(const json& j, const char* what) {
  int64_t value = 0;
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() >= static_cast<uint64_t>(kLargest)) not_a_number(j, what);
    value = static_cast<int64_t>(j.get<uint64_t>());
  } else if (j.is_number_integer()) {
    value = j.get<int64_t>();
  } else if (j.is_number_float()) {
    const double d = j.get<double>();
    if (!(d > -static_cast<double>(kLargest) && d < static_cast<double>(kLargest))) not_a_number(j, what);
    value = static_cast<int64_t>(d);
  } else if (j.is_string()) {
    try {
      value = std::stoll(j.get<std::string>(), nullptr, 0);
    } catch (const std::exception&) {
      not_a_number(j, what);
    }
  } else {
    not_a_number(j, what);
  }
  if (value <= -kLargest || value >= kLargest) not_a_number(j, what);
  return value;
}

uint64_t as_flow(const json& j) {
  try {
    return static_cast<uint64_t>(std::stoull(j.is_string() ? j.get<std::string>() : j.dump(), nullptr, 0));
  } catch (const std::exception&) {
    throw TraceFormatError("field 'flow' is not a number: " + j.dump().substr(0, 80));
  }
}

std::string as_text(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// Converts one "X" object; lane_of supplies the lane when args has none.
template <typename LaneOf>
Event event_from(const json& j, LaneOf lane_of) {
  Event e;
  e.rank = static_cast<int>(as_int(j.value("pid", json(0)), "pid"));
  e.name = as_text(j.value("name", json("")));
  e.category = as_text(j.value("cat", json("")));
  e.begin_us = as_int(j.value("ts", json(0)), "ts");
  e.end_us = e.begin_us + as_int(j.value("dur", json(0)), "dur");
  int64_t tid = as_int(j.value("tid", json(0)), "tid");
  bool have_lane = false;
  auto args = j.find("args");
  if (args != j.end() && args->is_object()) {
    for (auto it = args->begin(); it != args->end(); ++it) {
      const std::string& key = it.key();
      if (key == "lane") {
        e.lane = as_text(*it);
        have_lane = true;
      } else if (key == "bytes") {
        e.bytes = as_int(*it, "bytes");
      } else if (key == "peer") {
        e.peer = static_cast<int>(as_int(*it, "peer"));
      } else if (key == "flow") {
        e.flow = as_flow(*it);
      } else {
        e.args.emplace_back(key, as_text(*it));
      }
    }
  }
  if (!have_lane) e.lane = lane_of(e.rank, tid);
  return e;
}

// Converts one "C" object: a counter sample (event.hpp), every arg a series.
Event counter_from(const json& j) {
  Event e;
  e.rank = static_cast<int>(as_int(j.value("pid", json(0)), "pid"));
  e.name = as_text(j.value("name", json("")));
  e.category = kCounterCategory;
  e.lane = kLaneCounter;
  e.begin_us = as_int(j.value("ts", json(0)), "ts");
  e.end_us = e.begin_us;
  auto args = j.find("args");
  if (args != j.end() && args->is_object())
    for (auto it = args->begin(); it != args->end(); ++it) e.args.emplace_back(it.key(), as_text(*it));
  return e;
}

struct Collector {
  const ReadLimits& limits;
  std::vector<Event> events;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;

  void take(const json& j) {
    if (!j.is_object()) return;
    auto ph = j.find("ph");
    if (ph == j.end() || !ph->is_string()) return;
    const std::string& kind = ph->get_ref<const std::string&>();
    if (kind == "M") {
      if (j.value("name", json("")) == "thread_name") {
        auto args = j.find("args");
        if (args != j.end() && args->is_object() && args->contains("name"))
          thread_names[{as_int(j.value("pid", json(0)), "pid"), as_int(j.value("tid", json(0)), "tid")}] =
              as_text((*args)["name"]);
      } else if (j.value("name", json("")) == "clock_offset") {
        // Not applied here (the DOM reader returns events only), but checked
        // as the streaming reader checks it, so that both refuse the same files.
        auto args = j.find("args");
        if (args == j.end() || !args->is_object()) return;
        if (!args->contains("offset_us") || !args->contains("uncertainty_us"))
          throw TraceFormatError("clock_offset metadata needs args offset_us and uncertainty_us");
        as_int(j.value("pid", json(0)), "pid");
        as_int((*args)["offset_us"], "offset_us");
        as_int((*args)["uncertainty_us"], "uncertainty_us");
      }
      return;
    }
    if (kind != "X" && kind != "C") return;
    if (static_cast<int64_t>(events.size()) >= limits.max_events)
      throw TraceFormatError("more than " + std::to_string(limits.max_events) + " events");
    if (kind == "C") {
      events.push_back(counter_from(j));
      return;
    }
    events.push_back(event_from(j, [this](int rank, int64_t tid) {
      auto it = thread_names.find({rank, tid});
      return it != thread_names.end() ? it->second : std::to_string(tid);
    }));
  }
};

}  // namespace

std::vector<Event> parse_chrome_trace_dom(const std::string& text, const ReadLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_file_bytes)
    throw TraceFormatError("trace is larger than " + std::to_string(limits.max_file_bytes) + " bytes");
  Collector collector{limits, {}, {}};
  // Each event object is converted as soon as it is parsed and then dropped
  // from the document (the callback returns false), so a million events
  // never sit in memory twice.
  // depth counts the containers still open after an event's object closed:
  // {"traceEvents":[ {...} ]} -> 2, a bare [ {...} ] -> 1.
  int event_depth = -1;
  auto callback = [&](int depth, json::parse_event_t kind, json& parsed) {
    if (event_depth < 0) event_depth = kind == json::parse_event_t::array_start ? 1 : 2;
    if (kind != json::parse_event_t::object_end || depth != event_depth) return true;
    collector.take(parsed);
    return false;
  };
  try {
    json document = json::parse(text, callback, /*allow_exceptions=*/true);
    if (!document.is_object() && !document.is_array() && !document.is_discarded())
      throw TraceFormatError("not a Chrome trace: top level is neither an object nor an array");
  } catch (const json::exception& e) {
    throw TraceFormatError(std::string("malformed trace JSON after ") + std::to_string(collector.events.size()) +
                           " events: " + e.what());
  }
  return std::move(collector.events);
}

Event parse_event_line(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw TraceFormatError(std::string("malformed event line: ") + e.what());
  }
  const json ph = j.is_object() ? j.value("ph", json("")) : json();
  if (ph == "C") return counter_from(j);
  if (ph != "X")
    throw TraceFormatError("event line is not an \"X\" or \"C\" event object: " + line.substr(0, 80));
  return event_from(j, [](int, int64_t tid) { return std::to_string(tid); });
}

std::optional<std::pair<int, ClockOffset>> parse_clock_offset_line(const std::string& line) {
  // Cheap test first: events are most lines, and they are not metadata.
  if (line.find("\"clock_offset\"") == std::string::npos) return std::nullopt;
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw TraceFormatError(std::string("malformed clock_offset line: ") + e.what());
  }
  if (!j.is_object() || j.value("ph", json("")) != "M" || j.value("name", json("")) != "clock_offset")
    return std::nullopt;
  const json args = j.value("args", json::object());
  if (!j.contains("pid") || !j["pid"].is_number_integer() || !args.is_object() || !args.contains("offset_us") ||
      !args["offset_us"].is_number_integer() || !args.contains("uncertainty_us") ||
      !args["uncertainty_us"].is_number_integer())
    throw TraceFormatError("clock_offset metadata needs an integer pid and args offset_us and uncertainty_us");
  return std::make_pair(j["pid"].get<int>(),
                        ClockOffset{args["offset_us"].get<int64_t>(), args["uncertainty_us"].get<int64_t>()});
}

}  // namespace distlab::trace
