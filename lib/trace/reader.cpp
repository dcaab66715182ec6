// The streaming Chrome-trace reader. Its rules are the DOM reader's
// (dom_reader.cpp), field by field, so the two give the same events:
// - an event is an object directly inside the top-level array, or directly
//   inside an array that is a value of the top-level object (traceEvents);
// - a repeated key counts once, its last value; args are taken in key order;
// - numbers and strings convert as in as_int / as_text / as_flow below;
// - "X" events and counter ("C") events are read, every other kind skipped.
#include "trace/reader.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <nlohmann/json.hpp>

#include "trace/json_pull.hpp"

namespace distlab::trace {
namespace {

using Kind = JsonScalar::Kind;

// Times, sizes and ids are whole numbers that fit in int64 with room to
// add two of them (a begin and a duration): |value| < 2^62.
constexpr int64_t kLargest = int64_t{1} << 62;

void as_text(const JsonScalar& s, std::string& out) {
  switch (s.kind) {
    case Kind::kString:
    case Kind::kContainer: out = s.text; return;
    case Kind::kUnsigned: out = std::to_string(s.unsigned_value); return;
    case Kind::kInteger: out = std::to_string(s.integer_value); return;
    case Kind::kFloat: out = nlohmann::json(s.float_value).dump(); return;
    case Kind::kBool: out = s.boolean ? "true" : "false"; return;
    case Kind::kNull: out = "null"; return;
  }
}

std::string as_text(const JsonScalar& s) {
  std::string out;
  as_text(s, out);
  return out;
}

[[noreturn]] void not_a_number(const JsonScalar& s, const char* what) {
  const std::string text = s.kind == Kind::kString ? nlohmann::json(s.text).dump() : as_text(s);
  throw TraceFormatError(std::string("field '") + what + "' is not a number in range: " + text.substr(0, 80));
}

int64_t as_int(const JsonScalar& s, const char* what) {
  int64_t value = 0;
  switch (s.kind) {
    case Kind::kUnsigned:
      if (s.unsigned_value >= static_cast<uint64_t>(kLargest)) not_a_number(s, what);
      value = static_cast<int64_t>(s.unsigned_value);
      break;
    case Kind::kInteger: value = s.integer_value; break;
    case Kind::kFloat:
      if (!(s.float_value > -static_cast<double>(kLargest) && s.float_value < static_cast<double>(kLargest)))
        not_a_number(s, what);
      value = static_cast<int64_t>(s.float_value);
      break;
    case Kind::kString:
      try {
        value = std::stoll(s.text, nullptr, 0);
      } catch (const std::exception&) {
        not_a_number(s, what);
      }
      break;
    default: not_a_number(s, what);
  }
  if (value <= -kLargest || value >= kLargest) not_a_number(s, what);
  return value;
}

uint64_t as_flow(const JsonScalar& s) {
  // Fast path for what the sink writes: "0x" and 16 hex digits.
  if (s.kind == Kind::kString && s.text.size() == 18 && s.text[0] == '0' && (s.text[1] == 'x' || s.text[1] == 'X')) {
    uint64_t value = 0;
    size_t i = 2;
    for (; i < 18; ++i) {
      const char c = s.text[i];
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (digit < 0) break;
      value = value << 4 | static_cast<uint64_t>(digit);
    }
    if (i == 18) return value;
  }
  const std::string text = as_text(s);
  try {
    return static_cast<uint64_t>(std::stoull(text, nullptr, 0));
  } catch (const std::exception&) {
    throw TraceFormatError("field 'flow' is not a number: " + text.substr(0, 80));
  }
}

// key == literal, without strlen: the length decides most comparisons.
template <size_t N>
bool key_is(std::string_view key, const char (&literal)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

}  // namespace

// One array element as read: the fields the reader looks at, the rest
// skipped. Buffers are reused from one element to the next.
struct ChromeEventReader::Element {
  enum Field { kPh, kName, kCat, kPid, kTid, kTs, kDur, kFieldCount };
  bool is_object = false;
  JsonScalar fields[kFieldCount];
  bool present[kFieldCount] = {};
  bool args_object = false;
  std::vector<std::pair<std::string, JsonScalar>> args;  // first args_used are this element's
  size_t args_used = 0;
  JsonScalar zero;  // the default of pid, tid, ts, dur
  JsonScalar empty;  // the default of name, cat

  Element() {
    zero.kind = Kind::kUnsigned;
    empty.kind = Kind::kString;
  }
  const JsonScalar& field(Field f, const JsonScalar& fallback) const { return present[f] ? fields[f] : fallback; }
};

ChromeEventReader::ChromeEventReader(const ReadLimits& limits, EventHandler on_event)
    : limits_(limits), on_event_(std::move(on_event)), element_(std::make_unique<Element>()) {}

ChromeEventReader::~ChromeEventReader() = default;

void ChromeEventReader::parse(JsonPull& json) {
  Element& el = *element_;
  el.is_object = false;
  if (json.peek() != '{') {
    json.skip_value();
    return;
  }
  el.is_object = true;
  std::fill(std::begin(el.present), std::end(el.present), false);
  el.args_object = false;
  el.args_used = 0;
  json.expect('{', "'{'");
  if (json.accept('}')) return;
  do {
    const std::string_view k = json.read_key_view();
    int field = -1;
    if (key_is(k, "ph")) field = Element::kPh;
    else if (key_is(k, "name")) field = Element::kName;
    else if (key_is(k, "cat")) field = Element::kCat;
    else if (key_is(k, "pid")) field = Element::kPid;
    else if (key_is(k, "tid")) field = Element::kTid;
    else if (key_is(k, "ts")) field = Element::kTs;
    else if (key_is(k, "dur")) field = Element::kDur;
    if (field >= 0) {
      json.read_scalar(el.fields[field]);
      el.present[field] = true;
    } else if (key_is(k, "args")) {
      el.args_used = 0;
      el.args_object = json.peek() == '{';
      if (!el.args_object) {
        json.skip_value();
        continue;
      }
      json.expect('{', "'{'");
      if (json.accept('}')) continue;
      do {
        if (el.args_used == el.args.size()) el.args.emplace_back();
        auto& [key, value] = el.args[el.args_used++];
        json.read_key(key);
        json.read_scalar(value);
      } while (json.accept(','));
      json.expect('}', "',' or '}' in args");
    } else {
      json.skip_value();
    }
  } while (json.accept(','));
  json.expect('}', "',' or '}' in an event");
}

void ChromeEventReader::deliver() {
  Element& el = *element_;
  if (!el.is_object || !el.present[Element::kPh] || el.fields[Element::kPh].kind != Kind::kString) return;
  // Args in key order, a repeated key by its last value: as a JSON object
  // (std::map) holds them.
  auto begin = el.args.begin();
  auto end = begin + static_cast<std::ptrdiff_t>(el.args_used);
  // Insertion sort: stable, and a handful of args need no more.
  for (auto it = begin + (begin == end ? 0 : 1); it < end; ++it)
    for (auto j = it; j != begin && (j - 1)->first > j->first; --j) std::iter_swap(j - 1, j);
  auto is_last_of_key = [&](decltype(begin) it) { return it + 1 == end || (it + 1)->first != it->first; };
  auto find_arg = [&](const char* key) -> const JsonScalar* {
    const JsonScalar* found = nullptr;
    for (auto it = begin; it != end; ++it)
      if (it->first == key) found = &it->second;
    return found;
  };

  const std::string& kind = el.fields[Element::kPh].text;
  if (kind == "M") {
    const JsonScalar& name = el.field(Element::kName, el.empty);
    if (name.kind != Kind::kString || !el.args_object) return;
    if (name.text == "thread_name") {
      if (const JsonScalar* lane = find_arg("name"))
        thread_names_[{as_int(el.field(Element::kPid, el.zero), "pid"),
                       as_int(el.field(Element::kTid, el.zero), "tid")}] = as_text(*lane);
    } else if (name.text == "clock_offset") {
      const JsonScalar* offset = find_arg("offset_us");
      const JsonScalar* uncertainty = find_arg("uncertainty_us");
      if (offset == nullptr || uncertainty == nullptr)
        throw TraceFormatError("clock_offset metadata needs args offset_us and uncertainty_us");
      const auto rank = static_cast<int>(as_int(el.field(Element::kPid, el.zero), "pid"));
      info_.clock_offsets[rank] = ClockOffset{as_int(*offset, "offset_us"), as_int(*uncertainty, "uncertainty_us")};
    }
    return;
  }
  const bool counter = key_is(kind, "C");
  if (!counter && !key_is(kind, "X")) return;
  if (info_.events >= limits_.max_events)
    throw TraceFormatError("more than " + std::to_string(limits_.max_events) + " events (the reader's limit)");
  Event& e = event_;
  e.rank = static_cast<int>(as_int(el.field(Element::kPid, el.zero), "pid"));
  as_text(el.field(Element::kName, el.empty), e.name);
  if (counter) {
    // A counter sample (event.hpp): every arg is a series, its value as text.
    e.lane = kLaneCounter;
    e.category = kCounterCategory;
    e.begin_us = as_int(el.field(Element::kTs, el.zero), "ts");
    e.end_us = e.begin_us;
    e.bytes = 0;
    e.peer = -1;
    e.flow = 0;
    e.args.clear();
    for (auto it = begin; it != end; ++it)
      if (is_last_of_key(it)) e.args.emplace_back(it->first, as_text(it->second));
    ++info_.events;
    on_event_(e);
    return;
  }
  as_text(el.field(Element::kCat, el.empty), e.category);
  e.begin_us = as_int(el.field(Element::kTs, el.zero), "ts");
  e.end_us = e.begin_us + as_int(el.field(Element::kDur, el.zero), "dur");
  const int64_t tid = as_int(el.field(Element::kTid, el.zero), "tid");
  e.bytes = 0;
  e.peer = -1;
  e.flow = 0;
  e.args.clear();
  bool have_lane = false;
  for (auto it = begin; it != end; ++it) {
    if (!is_last_of_key(it)) continue;
    const std::string& key = it->first;
    if (key_is(key, "lane")) {
      as_text(it->second, e.lane);
      have_lane = true;
    } else if (key_is(key, "bytes")) {
      e.bytes = as_int(it->second, "bytes");
    } else if (key_is(key, "peer")) {
      e.peer = static_cast<int>(as_int(it->second, "peer"));
    } else if (key_is(key, "flow")) {
      e.flow = as_flow(it->second);
    } else {
      e.args.emplace_back(key, as_text(it->second));
    }
  }
  if (!have_lane) {
    auto it = thread_names_.find({e.rank, tid});
    e.lane = it != thread_names_.end() ? it->second : std::to_string(tid);
  }
  ++info_.events;
  on_event_(e);
}

void apply_clock_offset(Event& event, int64_t offset_us) {
  int64_t begin = 0, end = 0;
  if (__builtin_add_overflow(event.begin_us, offset_us, &begin) || __builtin_add_overflow(event.end_us, offset_us, &end))
    throw TraceFormatError("rank " + std::to_string(event.rank) + "'s clock offset " + std::to_string(offset_us) +
                           " us moves its event '" + event.name.substr(0, 40) + "' out of range");
  event.begin_us = begin;
  event.end_us = end;
}

TraceInfo stream_chrome(ByteSource& source, const ReadLimits& limits, const EventHandler& on_event) {
  ChromeEventReader reader(limits, on_event);
  JsonPull json(source);
  auto events_array = [&] {
    json.expect('[', "'['");
    if (json.accept(']')) return;
    do {
      reader.parse(json);
      reader.deliver();
    } while (json.accept(','));
    json.expect(']', "',' or ']' after an event");
  };
  try {
    json.skip_bom();
    const int first = json.peek();
    if (first == '[') {
      events_array();
    } else if (first == '{') {
      json.expect('{', "'{'");
      if (!json.accept('}')) {
        std::string key;
        do {
          json.read_key(key);
          if (json.peek() == '[')
            events_array();
          else
            json.skip_value();
        } while (json.accept(','));
        json.expect('}', "',' or '}' at the top level");
      }
    } else {
      json.skip_value();
      json.expect_end();
      throw TraceFormatError("not a Chrome trace: top level is neither an object nor an array");
    }
    json.expect_end();
  } catch (const JsonSyntaxError& e) {
    throw TraceFormatError("malformed trace JSON after " + std::to_string(reader.info().events) + " events, " +
                           e.what());
  }
  return reader.info();
}

namespace {

std::vector<Event> collect(const std::function<TraceInfo(const EventHandler&)>& read, TraceInfo* info) {
  std::vector<Event> events;
  TraceInfo got = read([&events](Event& e) { events.push_back(e); });
  if (info != nullptr) *info = std::move(got);
  return events;
}

}  // namespace

TraceInfo stream_chrome_text(const std::string& text, const ReadLimits& limits, const EventHandler& on_event) {
  if (static_cast<int64_t>(text.size()) > limits.max_file_bytes)
    throw TraceFormatError("trace is larger than " + std::to_string(limits.max_file_bytes) + " bytes");
  ByteSource source(text);
  return stream_chrome(source, limits, on_event);
}

TraceInfo stream_chrome_file(const std::string& path, const ReadLimits& limits, const EventHandler& on_event) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw TraceFormatError("cannot open trace file '" + path + "'");
  if (std::fseek(file.get(), 0, SEEK_END) != 0)
    throw TraceFormatError("'" + path + "' is not a regular file (cannot seek)");
  const int64_t size = std::ftell(file.get());
  if (size < 0) throw TraceFormatError("'" + path + "' is not a regular file");
  if (size > limits.max_file_bytes)
    throw TraceFormatError("trace file '" + path + "' is " + std::to_string(size) + " bytes, more than the limit of " +
                           std::to_string(limits.max_file_bytes));
  std::rewind(file.get());
  ByteSource source(file.get());
  try {
    return stream_chrome(source, limits, on_event);
  } catch (const TraceFormatError& e) {
    throw TraceFormatError("'" + path + "': " + e.what());
  }
}

std::vector<Event> read_chrome_trace(const std::string& path, const ReadLimits& limits, TraceInfo* info) {
  return collect([&](const EventHandler& h) { return stream_chrome_file(path, limits, h); }, info);
}

std::vector<Event> parse_chrome_trace(const std::string& text, const ReadLimits& limits, TraceInfo* info) {
  return collect([&](const EventHandler& h) { return stream_chrome_text(text, limits, h); }, info);
}

}  // namespace distlab::trace
