// Inside lib/flight: reading one of the flight files' JSON forms (a dump,
// dump_file.cpp; an exit record, exit_file.cpp) whole, or refusing it with
// one line (BadDump), never a crash. Not part of the library's interface.
#pragma once

#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "flight/dump_file.hpp"

namespace distlab::flight {

// A whole number of type T from `j`, or std::invalid_argument (which
// read_json_file turns into a BadDump naming the file): nlohmann's get<T>()
// converts a float (1.8e21) or a number past T's range with undefined
// behaviour (found by fuzz_flight_why). Every number of a flight file is
// read through it.
template <class T>
T whole(const nlohmann::json& j) {
  if (!j.is_number_integer()) throw std::invalid_argument("not a whole number: " + j.dump());
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw std::invalid_argument("out of range: " + j.dump());
    return static_cast<T>(v);
  }
  const int64_t v = j.get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
    throw std::invalid_argument("out of range: " + j.dump());
  return static_cast<T>(v);
}

template <class T>
std::vector<T> wholes(const nlohmann::json& j) {
  if (!j.is_array()) throw std::invalid_argument("not a list: " + j.dump());
  std::vector<T> out;
  for (const nlohmann::json& item : j) out.push_back(whole<T>(item));
  return out;
}

// Reads `path`, checks "format" is `format` and "version" is `version`, and
// hands the object to fill(json). `what` and `name` word the refusals: "not
// a flight recorder file", "flight recorder version 2, this tool reads
// version 1".
template <typename Fill>
void read_json_file(const std::string& path, const std::string& format, int version, const std::string& what,
                    const std::string& name, Fill fill) {
  using nlohmann::json;
  std::ifstream in(path);
  if (!in) throw BadDump(path + ": cannot be read (missing?)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json j = json::parse(text.str());
    if (!j.is_object() || j.value("format", "") != format)
      throw BadDump(path + ": not " + what + " (no \"format\": \"" + format + "\")");
    const int found = whole<int>(j.at("version"));
    if (found != version)
      throw BadDump(path + ": " + name + " version " + std::to_string(found) + ", this tool reads version " +
                    std::to_string(version));
    fill(j);
  } catch (const BadDump&) {
    throw;
  } catch (const json::parse_error& e) {
    throw BadDump(path + ": damaged (not complete JSON: " + std::string(e.what()).substr(0, 120) + ")");
  } catch (const std::exception& e) {
    throw BadDump(path + ": damaged (" + std::string(e.what()).substr(0, 160) + ")");
  }
}

}  // namespace distlab::flight
