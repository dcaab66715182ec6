#include "trace_loader.hpp"

#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

namespace distlab::viz {
namespace {

// Every line that is a JSON object by itself, joined into one array. The
// sink writes "{...},\n" per event, so a cut leaves at most one partial line.
std::string complete_lines(const std::string& text, size_t* kept, size_t* dropped) {
  std::string out = "[";
  size_t start = 0;
  while (start < text.size()) {
    size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    size_t a = start;
    size_t b = stop;
    while (a < b && std::isspace(static_cast<unsigned char>(text[a]))) ++a;
    while (b > a && (std::isspace(static_cast<unsigned char>(text[b - 1])) || text[b - 1] == ',')) --b;
    start = stop + 1;
    if (a == b || text[a] != '{') continue;
    const std::string line = text.substr(a, b - a);
    if (!nlohmann::json::accept(line)) {
      // The header line ({"displayTimeUnit":..,"traceEvents":[) is no event.
      if (line.find("\"ph\"") != std::string::npos) ++*dropped;
      continue;
    }
    if (*kept > 0) out += ',';
    out += line;
    ++*kept;
  }
  out += ']';
  return out;
}

std::vector<trace::Event> parse(const std::string& text, const trace::ReadLimits& limits) {
  try {
    return trace::parse_chrome_trace(text, limits);
  } catch (const trace::TraceFormatError&) {
    throw;
  } catch (const std::exception& e) {
    // The reader's own checks throw TraceFormatError; anything else (a
    // number conversion deep inside) is still a malformed file.
    throw trace::TraceFormatError(std::string("malformed trace: ") + e.what());
  }
}

}  // namespace

LoadedTrace load_trace_text(const std::string& text, const trace::ReadLimits& limits) {
  LoadedTrace loaded;
  try {
    loaded.events = parse(text, limits);
  } catch (const trace::TraceFormatError& whole_file) {
    size_t kept = 0;
    size_t dropped = 0;
    const std::string lines = complete_lines(text, &kept, &dropped);
    std::vector<trace::Event> recovered;
    try {
      if (kept > 0) recovered = parse(lines, limits);
    } catch (const trace::TraceFormatError&) {
      recovered.clear();
    }
    if (recovered.empty()) throw whole_file;
    loaded.events = std::move(recovered);
    loaded.warnings.push_back(std::string("the trace is cut short or damaged (") + whole_file.what() + "); read " +
                              std::to_string(loaded.events.size()) + " events from its complete lines" +
                              (dropped > 0 ? ", skipped " + std::to_string(dropped) + " damaged line(s)" : ""));
  }
  if (loaded.events.empty()) loaded.warnings.push_back("the trace holds no complete (\"X\") events");
  return loaded;
}

LoadedTrace load_trace_file(const std::string& path, const trace::ReadLimits& limits) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) throw trace::TraceFormatError("cannot open trace file '" + path + "'");
  if (!S_ISREG(info.st_mode)) throw trace::TraceFormatError("'" + path + "' is not a regular file");
  if (info.st_size > limits.max_file_bytes)
    throw trace::TraceFormatError("trace file '" + path + "' is " + std::to_string(info.st_size) +
                                  " bytes, more than the limit of " + std::to_string(limits.max_file_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace::TraceFormatError("cannot open trace file '" + path + "'");
  std::string text(static_cast<size_t>(info.st_size), '\0');
  in.read(text.data(), info.st_size);
  text.resize(static_cast<size_t>(in.gcount()));
  try {
    LoadedTrace loaded = load_trace_text(text, limits);
    for (std::string& w : loaded.warnings) w = "'" + path + "': " + w;
    return loaded;
  } catch (const trace::TraceFormatError& e) {
    throw trace::TraceFormatError("'" + path + "': " + e.what());
  }
}

}  // namespace distlab::viz
