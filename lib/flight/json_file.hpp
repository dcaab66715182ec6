// Inside lib/flight: reading one of the flight files' JSON forms (a dump,
// dump_file.cpp; an exit record, exit_file.cpp) whole, or refusing it with
// one line (BadDump), never a crash. Not part of the library's interface.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "flight/dump_file.hpp"

namespace distlab::flight {

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
    const int found = j.at("version").get<int>();
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
