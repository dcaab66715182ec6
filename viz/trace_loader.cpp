#include "trace_loader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>

#include "trace/config.hpp"
#include "trace/json_pull.hpp"

namespace distlab::viz {
namespace {

// Where the events of one load go, and how to forget them when the whole
// file failed and its complete lines are read instead.
struct Target {
  std::function<void(trace::Event&)> take;
  std::function<void()> forget;
};

// A recovered line longer than this is not one of the sink's events.
constexpr size_t kMaxLineBytes = size_t{64} << 20;

// Every line that is a JSON object by itself, as the elements of one array.
// The sink writes "{...},\n" per event, so a cut leaves at most one partial
// line. Calls next_line(line) until it returns false.
trace::TraceInfo complete_lines(const std::function<bool(std::string&)>& next_line, const trace::ReadLimits& limits,
                                const Target& target, size_t* kept, size_t* dropped) {
  trace::ChromeEventReader reader(limits, target.take);
  std::string line;
  while (next_line(line)) {
    size_t a = 0;
    size_t b = line.size();
    while (a < b && std::isspace(static_cast<unsigned char>(line[a]))) ++a;
    while (b > a && (std::isspace(static_cast<unsigned char>(line[b - 1])) || line[b - 1] == ',')) --b;
    if (a == b || line[a] != '{') continue;
    const std::string object = line.substr(a, b - a);
    try {
      trace::ByteSource source(object);
      trace::JsonPull json(source);
      reader.parse(json);
      json.expect_end();
    } catch (const trace::TraceFormatError&) {
      // The header line ({"displayTimeUnit":..,"traceEvents":[) is no event.
      if (object.find("\"ph\"") != std::string::npos) ++*dropped;
      continue;
    }
    ++*kept;
    reader.deliver();  // a bad field in a complete line: the recovery fails
  }
  return reader.info();
}

LoadReport load(const std::function<trace::TraceInfo(const trace::EventHandler&)>& whole,
                const std::function<std::function<bool(std::string&)>()>& lines, const trace::ReadLimits& limits,
                const Target& target) {
  LoadReport report;
  try {
    try {
      report.info = whole(target.take);
    } catch (const trace::TraceFormatError&) {
      throw;
    } catch (const std::exception& e) {
      // The reader's own checks throw TraceFormatError; anything else (out
      // of memory deep inside) still names the file.
      throw trace::TraceFormatError(std::string("cannot read the trace: ") + e.what());
    }
  } catch (const trace::TraceFormatError& whole_file) {
    target.forget();
    size_t kept = 0;
    size_t dropped = 0;
    trace::TraceInfo recovered;
    try {
      recovered = complete_lines(lines(), limits, target, &kept, &dropped);
    } catch (const std::exception&) {
      recovered = trace::TraceInfo{};
    }
    if (recovered.events == 0) {
      target.forget();
      throw whole_file;
    }
    report.info = std::move(recovered);
    report.warnings.push_back(std::string("the trace is cut short or damaged (") + whole_file.what() + "); read " +
                              std::to_string(report.info.events) + " events from its complete lines" +
                              (dropped > 0 ? ", skipped " + std::to_string(dropped) + " damaged line(s)" : ""));
  }
  report.events = static_cast<size_t>(report.info.events);
  // info.events counts counter samples too: a file of memory samples alone
  // is a trace worth opening (the Memory panel), not an empty one.
  if (report.events == 0)
    report.warnings.push_back("the trace holds no events (no complete \"X\" events, no counter \"C\" samples)");
  return report;
}

std::function<std::function<bool(std::string&)>()> text_lines(const std::string& text) {
  return [&text] {
    return std::function<bool(std::string&)>([&text, start = size_t{0}](std::string& line) mutable {
      if (start >= text.size()) return false;
      size_t stop = text.find('\n', start);
      if (stop == std::string::npos) stop = text.size();
      line.assign(text, start, stop - start);
      start = stop + 1;
      return true;
    });
  };
}

std::function<std::function<bool(std::string&)>()> file_lines(const std::string& path) {
  return [path] {
    auto in = std::make_shared<std::ifstream>(path, std::ios::binary);
    return std::function<bool(std::string&)>([in](std::string& line) {
      while (std::getline(*in, line)) {
        if (line.size() <= kMaxLineBytes) return true;
      }
      return false;
    });
  };
}

// The events a file added to `model` since `mark`, each rank's moved by
// the clock offset the file gives it.
void shift_ranks(TraceModel& model, const TraceModel::Checkpoint& mark, const trace::TraceInfo& info) {
  for (const auto& [rank, offset] : info.clock_offsets)
    if (offset.offset_us != 0) model.shift_rank(mark, rank, offset.offset_us);
}

int64_t check_file(const std::string& path, const trace::ReadLimits& limits) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) throw trace::TraceFormatError("cannot open trace file '" + path + "'");
  if (!S_ISREG(info.st_mode)) throw trace::TraceFormatError("'" + path + "' is not a regular file");
  if (info.st_size > limits.max_file_bytes)
    throw trace::TraceFormatError("trace file '" + path + "' is " + std::to_string(info.st_size) +
                                  " bytes, more than the limit of " + std::to_string(limits.max_file_bytes));
  return info.st_size;
}

void apply_offsets(const trace::TraceInfo& info, std::vector<trace::Event>& events) {
  if (info.clock_offsets.empty()) return;
  for (trace::Event& e : events) {
    auto it = info.clock_offsets.find(e.rank);
    if (it != info.clock_offsets.end()) trace::apply_clock_offset(e, it->second.offset_us);
  }
}

bool exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

Target vector_target(std::vector<trace::Event>& events) {
  return Target{[&events](trace::Event& e) { events.push_back(e); }, [&events] { events.clear(); }};
}

}  // namespace

LoadReport load_trace_into(const std::string& path, TraceModel& model, const trace::ReadLimits& limits) {
  const int64_t bytes = check_file(path, limits);
  model.reserve(static_cast<size_t>(std::min<int64_t>(bytes / 256, limits.max_events)));
  const TraceModel::Checkpoint mark = model.checkpoint();
  const Target target{[&model](trace::Event& e) { model.add(e); }, [&model, mark] { model.rollback(mark); }};
  try {
    LoadReport report = load([&](const trace::EventHandler& h) { return trace::stream_chrome_file(path, limits, h); },
                             file_lines(path), limits, target);
    shift_ranks(model, mark, report.info);
    for (std::string& w : report.warnings) w = "'" + path + "': " + w;
    return report;
  } catch (const trace::TraceFormatError& e) {
    model.rollback(mark);
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw trace::TraceFormatError("'" + path + "': " + what);
  }
}

OpenedTraces open_traces(const std::vector<std::string>& paths, const trace::ReadLimits& limits) {
  // Straight from the files into the model: no events vector in between.
  OpenedTraces opened;
  opened.paths = paths;
  for (const std::string& path : paths) {
    LoadReport report = load_trace_into(path, opened.model, limits);
    opened.warnings.insert(opened.warnings.end(), report.warnings.begin(), report.warnings.end());
    opened.clock_offsets.insert(report.info.clock_offsets.begin(), report.info.clock_offsets.end());
  }
  opened.model.finalize();
  return opened;
}

TraceDownload::TraceDownload(std::vector<std::string> paths, const trace::ReadLimits& limits)
    : limits_(limits), opened_(std::make_unique<OpenedTraces>()) {
  opened_->paths = std::move(paths);
}

TraceDownload::~TraceDownload() = default;

void TraceDownload::begin_file(int64_t expected_bytes) {
  reader_.reset();
  if (failed_ || files_ >= opened_->paths.size()) {
    failed_ = true;
    return;
  }
  TraceModel& model = opened_->model;
  if (expected_bytes > 0) model.reserve(static_cast<size_t>(std::min<int64_t>(expected_bytes / 256, limits_.max_events)));
  mark_ = model.checkpoint();
  reader_ = std::make_unique<trace::ChromePushReader>(limits_, [&model](trace::Event& e) { model.add(e); });
}

char* TraceDownload::space(size_t n) {
  // A file given up is still received (into a scratch buffer) until it ends.
  if (reader_ == nullptr) {
    scratch_.resize(n);
    return scratch_.data();
  }
  return reader_->space(n);
}

void TraceDownload::commit(size_t n) {
  if (reader_ == nullptr) return;
  reader_->commit(n);
  if (reader_->failed())
    give_up();
  else
    opened_->model.index_flows();
}

void TraceDownload::end_file() {
  ++files_;
  if (reader_ == nullptr) return;
  // As load_trace_into: a file read whole with events; its clock offsets applied.
  if (!reader_->finish() || reader_->info().events == 0) {
    give_up();
    return;
  }
  shift_ranks(opened_->model, mark_, reader_->info());
  opened_->clock_offsets.insert(reader_->info().clock_offsets.begin(), reader_->info().clock_offsets.end());
  reader_.reset();
}

void TraceDownload::give_up() {
  reader_.reset();
  failed_ = true;
  opened_->model = TraceModel();  // its memory back before the files are read again
}

std::unique_ptr<OpenedTraces> TraceDownload::opened() {
  if (opened_ == nullptr || failed_ || reader_ != nullptr || files_ != opened_->paths.size()) return nullptr;
  opened_->model.finalize();
  return std::move(opened_);
}

LoadedTrace load_trace_text(const std::string& text, const trace::ReadLimits& limits) {
  LoadedTrace loaded;
  LoadReport report = load([&](const trace::EventHandler& h) { return trace::stream_chrome_text(text, limits, h); },
                           text_lines(text), limits, vector_target(loaded.events));
  loaded.warnings = std::move(report.warnings);
  loaded.info = std::move(report.info);
  apply_offsets(loaded.info, loaded.events);
  return loaded;
}

LoadedTrace load_trace_file(const std::string& path, const trace::ReadLimits& limits) {
  check_file(path, limits);
  LoadedTrace loaded;
  try {
    LoadReport report = load([&](const trace::EventHandler& h) { return trace::stream_chrome_file(path, limits, h); },
                             file_lines(path), limits, vector_target(loaded.events));
    loaded.warnings = std::move(report.warnings);
    loaded.info = std::move(report.info);
  } catch (const trace::TraceFormatError& e) {
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;
    throw trace::TraceFormatError("'" + path + "': " + what);
  }
  for (std::string& w : loaded.warnings) w = "'" + path + "': " + w;
  apply_offsets(loaded.info, loaded.events);
  return loaded;
}

std::vector<std::string> rank_files_of(const std::string& path) {
  std::vector<std::string> files;
  if (exists(path)) return files;
  for (int rank = 0;; ++rank) {
    std::string file = trace::trace_file_for(path, rank, /*several_processes=*/true);
    if (!exists(file)) break;
    files.push_back(std::move(file));
  }
  return files;
}

std::vector<std::string> open_rank_files_instead(std::vector<std::string>& paths) {
  std::vector<std::string> opened, lines;
  for (const std::string& path : paths) {
    const std::vector<std::string> ranks = rank_files_of(path);
    if (ranks.empty()) {
      opened.push_back(path);
      continue;
    }
    lines.push_back("'" + path + "' does not exist: opened the " + std::to_string(ranks.size()) +
                    " file(s) its ranks wrote, " + ranks.front() + (ranks.size() > 1 ? " .. " + ranks.back() : ""));
    opened.insert(opened.end(), ranks.begin(), ranks.end());
  }
  paths = std::move(opened);
  return lines;
}

}  // namespace distlab::viz
