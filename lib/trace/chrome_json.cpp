#include "trace/chrome_json.hpp"

#include <charconv>
#include <cinttypes>
#include <filesystem>
#include <stdexcept>

namespace distlab::trace {
namespace {

void append_escaped(std::string& out, const std::string& text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string hex_id(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, id);
  return buf;
}

// A counter's value as a JSON number when it is a decimal integer written
// the way std::to_string writes it (what Recorder::counter stores), so that
// it reads back as the same text; anything else (a foreign trace's "1.5")
// stays a string rather than risk writing invalid JSON.
void append_counter_value(std::string& out, const std::string& value) {
  int64_t number = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, error] = std::from_chars(value.data(), end, number);
  if (error == std::errc() && ptr == end && !value.empty() && std::to_string(number) == value)
    out += value;
  else
    append_escaped(out, value);
}

// A counter sample as a "C" event: no tid (a counter track belongs to the
// process, named by the event's name), one number per series in args.
std::string counter_to_json(const Event& e) {
  std::string out;
  out.reserve(96);
  out += "{\"ph\":\"C\",\"pid\":" + std::to_string(e.rank) + ",\"name\":";
  append_escaped(out, e.name);
  out += ",\"ts\":" + std::to_string(e.begin_us) + ",\"args\":{";
  bool first = true;
  for (const auto& [key, value] : e.args) {
    if (!first) out += ',';
    first = false;
    append_escaped(out, key);
    out += ':';
    append_counter_value(out, value);
  }
  out += "}}";
  return out;
}

}  // namespace

std::string event_to_json(const Event& e, int tid) {
  if (e.is_counter()) return counter_to_json(e);
  std::string out;
  out.reserve(192);
  out += "{\"ph\":\"X\",\"pid\":" + std::to_string(e.rank) + ",\"tid\":" + std::to_string(tid);
  out += ",\"name\":";
  append_escaped(out, e.name);
  out += ",\"cat\":";
  append_escaped(out, e.category);
  out += ",\"ts\":" + std::to_string(e.begin_us) + ",\"dur\":" + std::to_string(e.duration_us());
  out += ",\"args\":{\"lane\":";
  append_escaped(out, e.lane);
  if (e.bytes != 0) out += ",\"bytes\":" + std::to_string(e.bytes);
  if (e.peer >= 0) out += ",\"peer\":" + std::to_string(e.peer);
  if (e.flow != 0) out += ",\"flow\":\"" + hex_id(e.flow) + "\"";
  for (const auto& [key, value] : e.args) {
    out += ',';
    append_escaped(out, key);
    out += ':';
    append_escaped(out, value);
  }
  out += "}}";
  return out;
}

ChromeJsonSink::ChromeJsonSink(const std::string& path) : path_(path) {
  // `--trace /tmp/run7/t.json` makes /tmp/run7, as --flight-dir does; if it
  // cannot, fopen's failure below says so.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ignored;
  if (!folder.empty()) std::filesystem::create_directories(folder, ignored);
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr)
    throw std::runtime_error("trace: cannot open '" + path + "' for writing (can its folder be made and written?)");
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", file_);
}

ChromeJsonSink::~ChromeJsonSink() { close(); }

void ChromeJsonSink::put_line(const std::string& line) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fputs(line.c_str(), file_);
}

void ChromeJsonSink::name_rank(int rank) {
  if (!named_ranks_.insert(rank).second) return;
  put_line("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(rank) +
           ",\"args\":{\"name\":\"rank " + std::to_string(rank) + "\"}}");
}

int ChromeJsonSink::track_tid(int rank, const std::string& lane, int level) {
  name_rank(rank);
  const auto [it, added] = tids_.emplace(std::make_tuple(rank, lane, level), tracks_of_rank_[rank]);
  if (!added) return it->second;
  ++tracks_of_rank_[rank];
  std::string meta = "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(rank) +
                     ",\"tid\":" + std::to_string(it->second) + ",\"args\":{\"name\":";
  append_escaped(meta, track_name(lane, level));
  meta += "}}";
  put_line(meta);
  return it->second;
}

void ChromeJsonSink::write(const Event& e) { write(e, e.end_us); }

std::string clock_offset_json(int rank, const ClockOffset& offset) {
  return "{\"ph\":\"M\",\"name\":\"clock_offset\",\"pid\":" + std::to_string(rank) +
         ",\"args\":{\"offset_us\":" + std::to_string(offset.offset_us) +
         ",\"uncertainty_us\":" + std::to_string(offset.uncertainty_us) + ",\"reference_rank\":0}}";
}

void ChromeJsonSink::write_clock_offset(int rank, const ClockOffset& offset) {
  if (file_ == nullptr) return;
  put_line(clock_offset_json(rank, offset));
}

void ChromeJsonSink::write(const Event& e, int64_t arrival_us) {
  if (file_ == nullptr) return;
  if (e.is_counter()) {
    // A counter track hangs off its process: no lane, no thread_name.
    name_rank(e.rank);
    put_line(event_to_json(e, 0));
    return;
  }
  // The arrow leaves the send where it starts and lands when the data
  // arrived: the recv's end ("bp":"e" binds it to the enclosing slice).
  const bool arrow = e.flow != 0 && (e.category == "send" || e.category == "recv");
  const bool is_send = e.category == "send";
  const int64_t ts = is_send ? e.begin_us : arrival_us;
  const int tid = track_tid(e.rank, e.lane,
                            levels_.place(e.rank, e.lane, e.begin_us, e.end_us,
                                          arrow ? std::optional<int64_t>(ts) : std::nullopt));
  put_line(event_to_json(e, tid));
  if (arrow) {
    std::string flow = std::string("{\"ph\":\"") + (is_send ? "s" : "f") + "\"" +
                       (is_send ? "" : ",\"bp\":\"e\"") + ",\"name\":\"p2p\",\"cat\":\"p2p\",\"id\":\"" +
                       hex_id(e.flow) + "\",\"pid\":" + std::to_string(e.rank) +
                       ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + std::to_string(ts) + "}";
    put_line(flow);
  }
}

void ChromeJsonSink::flush() {
  if (file_ != nullptr) std::fflush(file_);
}

void ChromeJsonSink::close() {
  if (file_ == nullptr) return;
  std::fputs("\n]}\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace distlab::trace
