// The exit record's JSON form (exit_file.hpp), written and read like the
// flight dumps (dump_file.cpp): whole or not at all, refused in one line.
#include "flight/exit_file.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flight/dump_file.hpp"
#include "flight/json_file.hpp"

namespace distlab::flight {

using nlohmann::json;

std::string describe(const ExitRecord& r) {
  const std::string code = "exit " + std::to_string(r.exit_code);
  return r.signal.empty() ? code : "killed by " + r.signal + ", " + code;
}

std::string exit_path(const std::string& dir, int rank) {
  return (dir.empty() ? std::string(".") : dir) + "/flight.rank" + std::to_string(rank) + ".exit.json";
}

bool is_exit_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  int rank = -1;
  int consumed = 0;
  return std::sscanf(name.c_str(), "flight.rank%d.exit.json%n", &rank, &consumed) == 1 && rank >= 0 &&
         static_cast<size_t>(consumed) == name.size();
}

void note_flight_dir(const std::string& dir) {
  const char* note = std::getenv(kFlightDirNoteVariable);
  if (note == nullptr || *note == '\0') return;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(dir, error);
  try {
    write_whole(note, (error ? dir : absolute.lexically_normal().string()) + "\n");
  } catch (const std::exception&) {
  }
}

std::string noted_flight_dir(const std::string& note_path) {
  std::string dir;
  std::getline(std::ifstream(note_path), dir);
  return dir;
}

void write_exit(const ExitRecord& r, const std::string& path) {
  const json j = {{"format", "distlab-flight-exit"},
                  {"version", r.version},
                  {"rank", r.rank},
                  {"world_size", r.world_size},
                  {"pid", r.pid},
                  {"host", r.host},
                  {"restart", r.restart},
                  {"exit_code", r.exit_code},
                  {"signal", r.signal},
                  {"asked_to_stop", r.asked_to_stop},
                  {"unix_us", r.unix_us}};
  write_whole(path, j.dump(1) + "\n");
}

ExitRecord read_exit(const std::string& path) {
  ExitRecord r;
  r.version = kExitVersion;
  read_json_file(path, "distlab-flight-exit", kExitVersion, "an exit record", "exit record", [&](const json& j) {
    r.rank = whole<int>(j.at("rank"));
    r.world_size = whole<int>(j.at("world_size"));
    if (r.world_size < 1 || r.world_size > kMaxWorldSize || r.rank < 0 || r.rank >= r.world_size)
      throw BadDump(path + ": rank " + std::to_string(r.rank) + " of world size " + std::to_string(r.world_size));
    r.pid = whole<int>(j.at("pid"));
    r.host = j.at("host").get<std::string>();
    r.restart = whole<int>(j.at("restart"));
    r.exit_code = whole<int>(j.at("exit_code"));
    r.signal = j.at("signal").get<std::string>();
    r.asked_to_stop = j.at("asked_to_stop").get<bool>();
    r.unix_us = whole<int64_t>(j.at("unix_us"));
  });
  return r;
}

}  // namespace distlab::flight
