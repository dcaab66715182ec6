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

// The same for a value delivered once: a string is swapped into `out`,
// whose old buffer the next element reads its value into.
void take_text(JsonScalar& s, std::string& out) {
  if (s.kind == Kind::kString || s.kind == Kind::kContainer)
    out.swap(s.text);
  else
    as_text(s, out);
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

// The value of each hex digit, -1 for any other byte: a look-up, as the
// digits of a flow id are random and branches on them mispredicted.
struct HexDigits {
  int8_t value[256] = {};
  constexpr HexDigits() {
    for (int c = 0; c < 256; ++c)
      value[c] = static_cast<int8_t>(c >= '0' && c <= '9' ? c - '0'
                                     : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                     : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                            : -1);
  }
};
constexpr HexDigits kHexDigits;

uint64_t as_flow(const JsonScalar& s) {
  // Fast path for what the sink writes: "0x" and 16 hex digits.
  if (s.kind == Kind::kString && s.text.size() == 18 && s.text[0] == '0' && (s.text[1] == 'x' || s.text[1] == 'X')) {
    uint64_t value = 0;
    int bad = 0;  // negative once a byte is not a digit
    for (size_t i = 2; i < 18; ++i) {
      const int digit = kHexDigits.value[static_cast<unsigned char>(s.text[i])];
      bad |= digit;
      value = value << 4 | static_cast<uint64_t>(digit & 0xF);
    }
    if (bad >= 0) return value;
  }
  const std::string text = as_text(s);
  try {
    return static_cast<uint64_t>(std::stoull(text, nullptr, 0));
  } catch (const std::exception&) {
    throw TraceFormatError("field 'flow' is not a number: " + text.substr(0, 80));
  }
}

// to = text; a copy without the library's general assignment when the
// length is unchanged, as it often is from one element to the next.
void assign(std::string& to, std::string_view text) {
  if (to.size() == text.size())
    std::memcpy(to.data(), text.data(), text.size());
  else
    to.assign(text.data(), text.size());
}

// key == literal, without strlen or a call: the length decides most
// comparisons, and the loop over a literal's few bytes is unrolled.
template <size_t N>
bool key_is(std::string_view key, const char (&literal)[N]) {
  if (key.size() != N - 1) return false;
  for (size_t i = 0; i + 1 < N; ++i)
    if (key[i] != literal[i]) return false;
  return true;
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
  // Args in key order, a repeated key by its last value, as a JSON object
  // (std::map) holds them: indices into args (sort_args).
  std::vector<uint32_t> order;
  JsonScalar zero;  // the default of pid, tid, ts, dur
  JsonScalar empty;  // the default of name, cat

  Element() {
    zero.kind = Kind::kUnsigned;
    empty.kind = Kind::kString;
  }
  const JsonScalar& field(Field f, const JsonScalar& fallback) const { return present[f] ? fields[f] : fallback; }
  const std::string& key(uint32_t i) const { return args[i].first; }
  const JsonScalar& value(uint32_t i) const { return args[i].second; }

  // Insertion: a handful of args need no more.
  void sort_args() {
    order.clear();
    for (uint32_t i = 0; i < args_used; ++i) {
      size_t at = order.size();
      int c = 1;
      while (at > 0 && (c = key(order[at - 1]).compare(key(i))) > 0) --at;
      if (at > 0 && c == 0)
        order[at - 1] = i;
      else
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), i);
    }
  }
  const JsonScalar* find_arg(std::string_view name) const {
    for (uint32_t i : order)
      if (key(i) == name) return &value(i);
    return nullptr;
  }
  // A field's text into `out` (empty when absent), as take_text.
  void take_field(Field f, std::string& out) {
    if (present[f])
      take_text(fields[f], out);
    else
      out.clear();
  }

  // The field a key names, -1 for any other key.
  static int field_of(std::string_view key) {
    if (key_is(key, "ph")) return kPh;
    if (key_is(key, "name")) return kName;
    if (key_is(key, "cat")) return kCat;
    if (key_is(key, "pid")) return kPid;
    if (key_is(key, "tid")) return kTid;
    if (key_is(key, "ts")) return kTs;
    if (key_is(key, "dur")) return kDur;
    return -1;
  }
  void clear() {
    std::fill(std::begin(present), std::end(present), false);
    args_object = false;
    args_used = 0;
  }
  // Room for the next arg, its key set: where its value goes.
  JsonScalar& next_arg(std::string_view key) {
    if (args_used == args.size()) args.emplace_back();
    auto& arg = args[args_used++];
    assign(arg.first, key);
    return arg.second;
  }

  // The object at the parser, read whole from the bytes in memory when it
  // is all there and made of the simplest tokens (JsonBytes: plain strings,
  // small whole numbers), as the sink writes every event: what read() would
  // make of it, without JsonPull's bookkeeping for each token. False, with
  // nothing taken, for anything else.
  bool read_in_memory(JsonPull& json) {
    clear();
    JsonBytes bytes = json.in_memory();
    if (!bytes.take('{')) return false;
    bytes.skip_space();
    if (!bytes.take('}')) {
      do {
        std::string_view key;
        if (!member_key(bytes, key)) return false;
        if (const int f = field_of(key); f >= 0) {
          if (!scalar(bytes, fields[f])) return false;
          present[f] = true;
        } else if (key_is(key, "args")) {
          args_used = 0;
          args_object = true;
          if (!bytes.take('{')) return false;
          bytes.skip_space();
          if (!bytes.take('}')) {
            do {
              if (!member_key(bytes, key) || !scalar(bytes, next_arg(key))) return false;
            } while (next_member(bytes));
            if (!bytes.take('}')) return false;
          }
        } else if (!scalar(bytes, skipped_)) {
          return false;
        }
      } while (next_member(bytes));
      if (!bytes.take('}')) return false;
    }
    json.consume(bytes.p);
    return true;
  }

  // The object at the parser, any JSON, every fault named.
  void read(JsonPull& json) {
    clear();
    json.expect('{', "'{'");
    if (json.accept('}')) return;
    do {
      const std::string_view key = json.read_key_view();
      if (const int f = field_of(key); f >= 0) {
        json.read_scalar(fields[f]);
        present[f] = true;
      } else if (key_is(key, "args")) {
        args_used = 0;
        args_object = json.peek() == '{';
        if (!args_object) {
          json.skip_value();
          continue;
        }
        json.expect('{', "'{'");
        if (json.accept('}')) continue;
        do {
          json.read_scalar(next_arg(json.read_key_view()));
        } while (json.accept(','));
        json.expect('}', "',' or '}' in args");
      } else {
        json.skip_value();
      }
    } while (json.accept(','));
    json.expect('}', "',' or '}' in an event");
  }

 private:
  JsonScalar skipped_;  // the value of a key the reader ignores

  // A key, its ':' and the whitespace around it.
  static bool member_key(JsonBytes& bytes, std::string_view& key) {
    if (!bytes.plain_string(key)) return false;
    bytes.skip_space();
    if (!bytes.take(':')) return false;
    bytes.skip_space();
    return true;
  }
  static bool scalar(JsonBytes& bytes, JsonScalar& out) {
    std::string_view text;
    if (bytes.plain_string(text)) {
      out.kind = Kind::kString;
      assign(out.text, text);
      return true;
    }
    if (bytes.small_unsigned(out.unsigned_value)) {
      out.kind = Kind::kUnsigned;
      return true;
    }
    return false;
  }
  // After a member: true at a ',' (taken, with the whitespace around it).
  static bool next_member(JsonBytes& bytes) {
    bytes.skip_space();
    if (!bytes.take(',')) return false;
    bytes.skip_space();
    return true;
  }
};

ChromeEventReader::ChromeEventReader(const ReadLimits& limits, EventHandler on_event)
    : limits_(limits), on_event_(std::move(on_event)), element_(std::make_unique<Element>()) {}

ChromeEventReader::~ChromeEventReader() = default;

void ChromeEventReader::parse(JsonPull& json) {
  Element& el = *element_;
  el.is_object = json.peek() == '{';
  if (!el.is_object)
    json.skip_value();
  else if (!el.read_in_memory(json))
    el.read(json);
}

void ChromeEventReader::deliver() {
  Element& el = *element_;
  if (!el.is_object || !el.present[Element::kPh] || el.fields[Element::kPh].kind != Kind::kString) return;
  el.sort_args();
  const std::string& kind = el.fields[Element::kPh].text;
  if (key_is(kind, "M")) {
    const JsonScalar& name = el.field(Element::kName, el.empty);
    if (name.kind != Kind::kString || !el.args_object) return;
    if (name.text == "thread_name") {
      if (const JsonScalar* lane = el.find_arg("name"))
        thread_names_[{as_int(el.field(Element::kPid, el.zero), "pid"),
                       as_int(el.field(Element::kTid, el.zero), "tid")}] = as_text(*lane);
    } else if (name.text == "clock_offset") {
      const JsonScalar* offset = el.find_arg("offset_us");
      const JsonScalar* uncertainty = el.find_arg("uncertainty_us");
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
  el.take_field(Element::kName, e.name);
  e.bytes = 0;
  e.peer = -1;
  e.flow = 0;
  // The args the event keeps, as text, in key order; their strings trade
  // buffers with the element's (take_text).
  size_t kept = 0;
  auto keep_arg = [&](uint32_t i) {
    if (kept == e.args.size()) e.args.emplace_back();
    auto& [key, value] = e.args[kept++];
    key.swap(el.args[i].first);
    take_text(el.args[i].second, value);
  };
  if (counter) {
    // A counter sample (event.hpp): every arg is a series, its value as text.
    e.lane = kLaneCounter;
    e.category = kCounterCategory;
    e.begin_us = as_int(el.field(Element::kTs, el.zero), "ts");
    e.end_us = e.begin_us;
    for (uint32_t i : el.order) keep_arg(i);
    e.args.resize(kept);
    ++info_.events;
    on_event_(e);
    return;
  }
  el.take_field(Element::kCat, e.category);
  e.begin_us = as_int(el.field(Element::kTs, el.zero), "ts");
  e.end_us = e.begin_us + as_int(el.field(Element::kDur, el.zero), "dur");
  const int64_t tid = as_int(el.field(Element::kTid, el.zero), "tid");
  bool have_lane = false;
  for (uint32_t i : el.order) {
    const std::string& key = el.key(i);
    if (key_is(key, "lane")) {
      take_text(el.args[i].second, e.lane);
      have_lane = true;
    } else if (key_is(key, "bytes")) {
      e.bytes = as_int(el.value(i), "bytes");
    } else if (key_is(key, "peer")) {
      e.peer = static_cast<int>(as_int(el.value(i), "peer"));
    } else if (key_is(key, "flow")) {
      e.flow = as_flow(el.value(i));
    } else {
      keep_arg(i);
    }
  }
  e.args.resize(kept);
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
