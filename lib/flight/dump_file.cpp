#include "flight/dump_file.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flight/json_file.hpp"

namespace distlab::flight {

using nlohmann::json;

std::string dump_path(const std::string& dir, int rank) {
  return (dir.empty() ? std::string(".") : dir) + "/flight.rank" + std::to_string(rank) + ".json";
}

namespace {

json to_json(const Entry& e) {
  json j = {{"id", e.id},       {"group", e.group}, {"group_rank", e.group_rank}, {"kind", e.kind},
            {"seq", e.seq},     {"op", e.op},       {"algorithm", e.algorithm},   {"peer", e.peer},
            {"root", e.root},   {"tag", e.tag},     {"dtype", e.dtype},           {"shape", e.shape},
            {"bytes", e.bytes}, {"site", e.site},   {"state", to_string(e.state)}, {"entered_us", e.entered_us},
            {"started_us", e.started_us}, {"ended_us", e.ended_us}};
  if (!e.error.empty()) j["error"] = e.error;
  return j;
}

Entry entry_from(const json& j) {
  Entry e;
  e.id = whole<uint64_t>(j.at("id"));
  e.group = j.at("group").get<std::string>();
  e.group_rank = whole<int>(j.at("group_rank"));
  e.kind = j.at("kind").get<std::string>();
  if (e.kind != "collective" && e.kind != "p2p") throw std::invalid_argument("kind '" + e.kind + "' is unknown");
  e.seq = whole<uint64_t>(j.at("seq"));
  e.op = j.at("op").get<std::string>();
  e.algorithm = j.at("algorithm").get<std::string>();
  e.peer = whole<int>(j.at("peer"));
  e.root = whole<int>(j.at("root"));
  e.tag = whole<int>(j.at("tag"));
  e.dtype = j.at("dtype").get<std::string>();
  e.shape = wholes<int64_t>(j.at("shape"));
  e.bytes = whole<int64_t>(j.at("bytes"));
  e.site = j.at("site").get<std::string>();
  e.state = state_from_string(j.at("state").get<std::string>());
  e.entered_us = whole<int64_t>(j.at("entered_us"));
  e.started_us = whole<int64_t>(j.at("started_us"));
  e.ended_us = whole<int64_t>(j.at("ended_us"));
  e.error = j.value("error", "");
  return e;
}

}  // namespace

void write_dump(const Dump& dump, const std::string& path) {
  json groups = json::array();
  for (const Group& g : dump.groups) groups.push_back({{"name", g.name}, {"ranks", g.ranks}});
  json entries = json::array();
  for (const Entry& e : dump.entries) entries.push_back(to_json(e));
  const json j = {{"format", "distlab-flight"}, {"version", dump.version},   {"rank", dump.rank},
                  {"world_size", dump.world_size}, {"pid", dump.pid},     {"host", dump.host},
                  {"reason", dump.reason},        {"dumped_us", dump.dumped_us}, {"dumped_unix_us", dump.dumped_unix_us},
                  {"capacity", dump.capacity},    {"recorded", dump.recorded},   {"exit", dump.exit},          {"groups", groups},
                  {"entries", entries}};
  write_whole(path, j.dump(1) + "\n");
}

void write_whole(const std::string& path, const std::string& text) {
  // Written beside its final name, then renamed over it: rename() within a
  // directory is atomic, so a reader finds the old file or the new one.
  const std::string temporary = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::remove(temporary.c_str());
      throw std::runtime_error("cannot write " + path + " (is its directory there and writable? DISTLAB_FLIGHT_DIR)");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot rename " + temporary + " to " + path);
  }
}

Dump read_dump(const std::string& path) {
  Dump dump;
  dump.version = kDumpVersion;
  read_json_file(path, "distlab-flight", kDumpVersion, "a flight recorder file", "flight recorder", [&](const json& j) {
    dump.rank = whole<int>(j.at("rank"));
    dump.world_size = whole<int>(j.at("world_size"));
    if (dump.world_size < 1 || dump.world_size > kMaxWorldSize || dump.rank < 0 || dump.rank >= dump.world_size)
      throw BadDump(path + ": rank " + std::to_string(dump.rank) + " of world size " + std::to_string(dump.world_size));
    dump.pid = whole<int>(j.at("pid"));
    dump.host = j.at("host").get<std::string>();
    dump.reason = j.at("reason").get<std::string>();
    dump.dumped_us = whole<int64_t>(j.at("dumped_us"));
    dump.dumped_unix_us = whole<int64_t>(j.at("dumped_unix_us"));
    dump.capacity = whole<uint64_t>(j.at("capacity"));
    dump.recorded = whole<uint64_t>(j.at("recorded"));
    dump.exit = j.at("exit").get<std::string>();
    for (const json& g : j.at("groups")) {
      dump.groups.push_back({g.at("name"), wholes<int>(g.at("ranks"))});
      for (const int member : dump.groups.back().ranks)  // why looks each member up among the world's ranks
        if (member < 0 || member >= dump.world_size)
          throw BadDump(path + ": group " + dump.groups.back().name + " holds rank " + std::to_string(member) +
                        ", outside the world of " + std::to_string(dump.world_size));
    }
    for (const json& e : j.at("entries")) dump.entries.push_back(entry_from(e));
  });
  return dump;
}

}  // namespace distlab::flight
